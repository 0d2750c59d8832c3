# Sourced by the scripts in scripts/ and by .ci/run: finds a JDK 21 or newer and exports
# JAVA_HOME and PATH for it. Order: $JAVA_HOME if it is new enough, then the newest JDK
# installed in the usual places, then the `java` on PATH. Exits with a plain message when
# there is none.

oneshot_jdk_major() { # $1 = a JDK home; prints its feature version, or nothing
  local release="$1/release" v
  [ -x "$1/bin/java" ] && [ -x "$1/bin/javac" ] || return 0
  if [ -f "$release" ]; then
    v=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$release")
  else
    v=$("$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
  fi
  [ "$v" = 1 ] && v=8
  printf '%s' "$v"
}

oneshot_find_jdk() {
  local min=21 best="" best_v=0 home v
  if [ -n "${JAVA_HOME:-}" ]; then
    v=$(oneshot_jdk_major "$JAVA_HOME")
    if [ -n "$v" ] && [ "$v" -ge "$min" ]; then printf '%s' "$JAVA_HOME"; return 0; fi
    echo "note: JAVA_HOME=$JAVA_HOME is not a JDK $min+; looking for another one" >&2
  fi
  for home in /usr/lib/jvm/* /opt/java/* /opt/jdk* /usr/java/* \
      "$HOME"/.sdkman/candidates/java/* /Library/Java/JavaVirtualMachines/*/Contents/Home; do
    [ -d "$home" ] || continue
    v=$(oneshot_jdk_major "$home")
    if [ -n "$v" ] && [ "$v" -ge "$min" ] && [ "$v" -gt "$best_v" ]; then best=$home; best_v=$v; fi
  done
  if [ -z "$best" ] && command -v javac >/dev/null 2>&1; then
    home=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
    v=$(oneshot_jdk_major "$home")
    if [ -n "$v" ] && [ "$v" -ge "$min" ]; then best=$home; fi
  fi
  [ -n "$best" ] && printf '%s' "$best"
}

ONESHOT_JDK=$(oneshot_find_jdk)
if [ -z "$ONESHOT_JDK" ]; then
  cat >&2 <<'MSG'
oneshot needs a JDK 21 or newer (it is built with JDK 25) and found none.
Install one, for example:
  Debian/Ubuntu:  sudo apt-get install openjdk-21-jdk-headless
  any Linux/macOS: Eclipse Temurin 25 from https://adoptium.net
then run this command again, or point JAVA_HOME at it.
MSG
  exit 1
fi
export JAVA_HOME="$ONESHOT_JDK"
export PATH="$JAVA_HOME/bin:$PATH"

# JDK 24+ warns when Maven's plugins use sun.misc.Unsafe; they are allowed to, quietly.
if [ "$(oneshot_jdk_major "$JAVA_HOME")" -ge 24 ]; then
  case " ${MAVEN_OPTS:-} " in
    *sun-misc-unsafe-memory-access*) ;;
    *) export MAVEN_OPTS="${MAVEN_OPTS:-} --sun-misc-unsafe-memory-access=allow" ;;
  esac
fi
