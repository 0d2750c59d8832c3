package io.oneshot.launch.local;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What a local attempt is started with: the provisionerd command line (this JVM's java and class
 * path, flags for a fast small start) and the reduced environment it begins from.
 */
public final class LocalCommand {
  private LocalCommand() {}

  /** JVM flags that make a one-shot provisionerd start fast and stay small. */
  public static final List<String> DEFAULT_JAVA_OPTIONS =
      List.of(
          "-XX:+UseSerialGC",
          "-XX:TieredStopAtLevel=1",
          "-XX:-UsePerfData",
          "-Xshare:auto",
          "-Xms16m",
          "-Xmx256m",
          "-Xss512k");

  /**
   * {@code java <options> -cp <this JVM's class path> io.oneshot.cli.Main provisionerd}, with every
   * class path entry made absolute (attempts run in their own directories). With the default
   * options, a provisionerd writes a class data sharing archive of what it loaded, named after
   * {@code archive}, and every later one maps it, which saves a good part of its start ({@link
   * LocalLauncher} gives each process its archive flags through a {@link SharedArchive}).
   */
  public static List<String> defaultCommand(List<String> javaOptions, Path archive) {
    return defaultCommand(javaOptions, archive, absoluteClassPath());
  }

  /** {@link #defaultCommand(List, Path)} on another class path (absolute entries). */
  public static List<String> defaultCommand(
      List<String> javaOptions, Path archive, List<String> cp) {
    Path javaBin = Path.of(System.getProperty("java.home"), "bin", "java");
    List<String> cmd = new ArrayList<>();
    cmd.add(javaBin.toString());
    // Signals go through libc (JNA); JDK 24+ warn on stderr without this.
    cmd.add("--enable-native-access=ALL-UNNAMED");
    if (javaOptions.isEmpty()) {
      cmd.addAll(DEFAULT_JAVA_OPTIONS);
      // The JVM archives classes from jars only (it fails at exit over a directory entry).
      if (cp.stream().allMatch(e -> e.endsWith(".jar"))) {
        cmd.add("-XX:+AutoCreateSharedArchive");
        cmd.add("-XX:SharedArchiveFile=" + archive.toAbsolutePath());
      }
    } else {
      cmd.addAll(javaOptions);
    }
    cmd.add("-cp");
    cmd.add(String.join(File.pathSeparator, cp));
    cmd.add("io.oneshot.cli.Main");
    cmd.add("provisionerd");
    return cmd;
  }

  /**
   * {@code cp} with each jar replaced by a copy of it in {@code dir}, named after its name, size
   * and time of change ({@code oneshot-<key>.jar}): attempts run from the copy, so a build that
   * rewrites the jar the dispatcher was started from (a {@code mvn package} in the checkout {@code
   * oneshot dev} runs from) does not pull it from under provisionerds that are running. A copy is
   * made once per version of the jar; copies of other versions unchanged for a day go. Directories
   * are kept as they are.
   */
  public static List<String> pinned(List<String> cp, Path dir) {
    List<String> out = new ArrayList<>(cp.size());
    for (String entry : cp) {
      Path jar = Path.of(entry);
      if (!entry.endsWith(".jar") || !Files.isRegularFile(jar)) {
        out.add(entry);
        continue;
      }
      try {
        Files.createDirectories(dir);
        String name = jar.getFileName().toString();
        String base = name.substring(0, name.length() - ".jar".length());
        String key =
            Long.toHexString(
                (jar.toAbsolutePath()
                            + "|"
                            + Files.size(jar)
                            + "|"
                            + Files.getLastModifiedTime(jar))
                        .hashCode()
                    & 0xffffffffL);
        Path copy = dir.resolve(base + "-" + key + ".jar");
        if (!Files.exists(copy)) {
          Path part = Files.createTempFile(dir, base, ".part");
          Files.copy(jar, part, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
          Files.move(part, copy, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        }
        removeStale(dir, base, copy);
        out.add(copy.toAbsolutePath().toString());
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(
            "cannot copy " + jar + " to " + dir + " for the attempts to run from", e);
      }
    }
    return out;
  }

  /** Copies of other versions of jar {@code base} in {@code dir} unchanged for a day. */
  private static void removeStale(Path dir, String base, Path keep) throws java.io.IOException {
    java.time.Instant dayAgo = java.time.Instant.now().minus(java.time.Duration.ofDays(1));
    try (var files = Files.list(dir)) {
      for (Path f : files.toList()) {
        String n = f.getFileName().toString();
        if (!f.equals(keep)
            && n.startsWith(base + "-")
            && n.endsWith(".jar")
            && n.substring(base.length() + 1, n.length() - 4).matches("[0-9a-f]{1,8}")
            && Files.getLastModifiedTime(f).toInstant().isBefore(dayAgo)) {
          Files.deleteIfExists(f);
        }
      }
    }
  }

  /**
   * This JVM's class path, every entry made absolute (for a child process in another directory).
   */
  public static List<String> absoluteClassPath() {
    List<String> cp = new ArrayList<>();
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      if (!entry.isEmpty()) {
        cp.add(Path.of(entry).toAbsolutePath().toString());
      }
    }
    return cp;
  }

  /** The environment an attempt starts from: PATH, locale and the names in {@code passEnv}. */
  public static Map<String, String> baseEnvironment(List<String> passEnv) {
    Map<String, String> env = new LinkedHashMap<>();
    Map<String, String> mine = System.getenv();
    env.put("PATH", mine.getOrDefault("PATH", "/usr/local/bin:/usr/bin:/bin"));
    env.put("LANG", mine.getOrDefault("LANG", "C.UTF-8"));
    for (String name : passEnv) {
      if (mine.containsKey(name)) {
        env.put(name, mine.get(name));
      }
    }
    return env;
  }

  /** Where {@code setsid} is, to give each attempt its own process group; null: nowhere. */
  static String findSetsid() {
    for (String p : List.of("/usr/bin/setsid", "/bin/setsid")) {
      if (Files.isExecutable(Path.of(p))) {
        return p;
      }
    }
    return null;
  }
}
