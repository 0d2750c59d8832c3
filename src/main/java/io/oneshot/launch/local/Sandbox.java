package io.oneshot.launch.local;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Each local attempt in a sandbox of its own, made by bubblewrap ({@code bwrap}, Debian's {@code
 * bubblewrap}; the sandbox Flatpak runs every application in). Chosen over hand-written namespace
 * code and over a container runtime: it is one small setuid-free executable that builds exactly the
 * namespaces and mounts asked of it, in one exec, without a daemon, so an attempt starts as fast as
 * without it (about 5 ms more here).
 *
 * <p>What an attempt sees: the system's programs and libraries read-only ({@code /usr}, and a few
 * files of {@code /etc}: users, name resolution, certificates), the JDK and provisionerd's jars
 * read-only, the directories of its {@code PATH} read-only, its own attempt directory (its work
 * directory, home, token file) read-write, a private {@code /tmp}, and {@code /proc} of its own
 * process namespace. Not the dispatcher's data directory, configuration or files, not the run
 * directory's other attempts, not any other process (its own pid namespace: another build's {@code
 * /proc/<pid>/environ} does not exist there), not System V IPC. As root, the attempt gets a user
 * namespace of its own and no capabilities. Its own directory is read-only to it but for its work
 * directory and {@code tmp}: the attempt file the dispatcher finds its process by after a restart
 * is not the build's to rewrite.
 *
 * <p>The network ({@code launcher.local.network}): {@code none} (the default) gives each attempt a
 * network namespace with its own loopback and nothing else, so that no service of the machine (a
 * database on loopback, another build's port, a metadata endpoint) is in reach; the oneshot API
 * comes in through a Unix socket in its directory ({@link ApiRelay}). {@code host} leaves it the
 * machine's network, for builds that must reach the clouds they provision: they then reach what the
 * machine reaches, loopback too, and the dispatcher proves each runner by the connection it holds
 * ({@link LocalLauncher#prove}).
 */
public final class Sandbox {
  private static final Logger log = LoggerFactory.getLogger(Sandbox.class);

  /** The files of {@code /etc} a build needs: users, name resolution, TLS roots, time zone. */
  static final List<String> ETC =
      List.of(
          "/etc/passwd",
          "/etc/group",
          "/etc/nsswitch.conf",
          "/etc/hosts",
          "/etc/host.conf",
          "/etc/resolv.conf",
          "/etc/gai.conf",
          "/etc/ssl",
          "/etc/ca-certificates",
          "/etc/pki",
          "/etc/alternatives",
          "/etc/ld.so.cache",
          "/etc/ld.so.conf",
          "/etc/ld.so.conf.d",
          "/etc/localtime",
          "/etc/timezone",
          "/etc/mime.types",
          "/etc/terraformrc");

  private final String bwrap;
  private final List<String> readOnly;
  private final boolean root;
  private final Network network;

  private Sandbox(String bwrap, List<String> readOnly, boolean root, Network network) {
    this.bwrap = bwrap;
    this.readOnly = readOnly;
    this.root = root;
    this.network = network;
  }

  /** The networks of {@code launcher.local.network}. */
  public enum Network {
    /** A network namespace of its own: its loopback, and the API through a socket. */
    NONE,
    /** The machine's network, loopback included. */
    HOST
  }

  /**
   * Whether an attempt of a route with {@code routeNetwork} ({@code routes[].network}; null: the
   * launcher's) has a network of its own, and the API through {@link ApiRelay}.
   */
  boolean ownNetwork(String routeNetwork) {
    return routeNetwork == null ? network == Network.NONE : routeNetwork.equals("none");
  }

  /** The isolation modes of {@code launcher.local.isolation}. */
  public enum Mode {
    /** bubblewrap when it works here, else plain (said loudly at start). */
    AUTO,
    /** bubblewrap, or the dispatcher does not start. */
    BUBBLEWRAP,
    /** plain processes, not isolated (said loudly at start). */
    NONE
  }

  /**
   * The sandbox {@code mode} asks for, for attempts started by {@code command}, or empty for plain
   * processes (with a WARN saying so).
   *
   * @param readOnly paths besides the command's own that attempts may read (the operator's)
   * @throws IllegalStateException when {@code mode} is {@link Mode#BUBBLEWRAP} and it cannot run
   */
  public static Optional<Sandbox> of(Mode mode, List<String> command, List<String> readOnly) {
    return of(mode, command, readOnly, Network.NONE);
  }

  /**
   * {@link #of(Mode, List, List)}, with attempts on {@code network}.
   *
   * @throws IllegalStateException when {@code mode} is {@link Mode#BUBBLEWRAP} and it cannot run
   */
  public static Optional<Sandbox> of(
      Mode mode, List<String> command, List<String> readOnly, Network network) {
    if (mode == Mode.NONE) {
      warnPlain("launcher.local.isolation is none");
      return Optional.empty();
    }
    String found = find();
    String why =
        found == null ? "bwrap (Debian's bubblewrap) is not installed" : probe(found, network);
    if (why != null) {
      if (mode == Mode.BUBBLEWRAP) {
        throw new IllegalStateException(
            "launcher.local.isolation is bubblewrap, but " + why + ": install bubblewrap");
      }
      warnPlain(why);
      return Optional.empty();
    }
    Set<String> ro = new LinkedHashSet<>();
    Path java = Path.of(command.get(0));
    if (java.getFileName().toString().equals("java")) {
      try {
        // The JDK whole: bin/java is a link into it on some systems.
        ro.add(java.toRealPath().getParent().getParent().toString());
      } catch (IOException e) {
        ro.add(java.getParent().getParent().toString());
      }
    } else {
      ro.add(java.toAbsolutePath().toString());
    }
    for (int i = 0; i + 1 < command.size(); i++) {
      if (command.get(i).equals("-cp") || command.get(i).equals("-classpath")) {
        for (String e : command.get(i + 1).split(File.pathSeparator)) {
          if (!e.isEmpty()) {
            ro.add(Path.of(e).toAbsolutePath().toString());
          }
        }
      }
    }
    ro.addAll(readOnly);
    ro.removeIf(p -> p.equals("/usr") || p.startsWith("/usr/"));
    if (network == Network.NONE) {
      log.info(
          "Attempts run isolated by bubblewrap ({}): a filesystem, process, IPC and network"
              + " namespace of their own each; the API reaches them through a socket.",
          found);
    } else {
      log.warn(
          "Attempts run isolated by bubblewrap ({}), but on this machine's network"
              + " (launcher.local.network: host): a build reaches every service this machine"
              + " reaches, those on loopback too (a database, another build's ports).",
          found);
    }
    return Optional.of(new Sandbox(found, List.copyOf(ro), isRoot(), network));
  }

  private static void warnPlain(String why) {
    log.warn(
        "ATTEMPTS ARE NOT ISOLATED ({}): every build runs as this dispatcher's user with its files"
            + " in reach, and can read the data directory and other builds' processes. Install"
            + " bubblewrap and set launcher.local.isolation to bubblewrap (or auto) on any machine"
            + " more than one team uses.",
        why);
  }

  private static String find() {
    for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
      Path p = Path.of(dir.isEmpty() ? "." : dir, "bwrap");
      if (Files.isExecutable(p)) {
        return p.toAbsolutePath().toString();
      }
    }
    return Files.isExecutable(Path.of("/usr/bin/bwrap")) ? "/usr/bin/bwrap" : null;
  }

  /** Why bubblewrap cannot make an attempt's sandbox here (no user namespaces), or null. */
  private static String probe(String bwrap, Network network) {
    List<String> cmd = new ArrayList<>(List.of(bwrap));
    // With a network namespace whatever the default: a route may ask for one.
    cmd.addAll(namespaces(isRoot(), true));
    cmd.addAll(List.of("--ro-bind", "/", "/", "--proc", "/proc", "--", "true"));
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      if (!p.waitFor(10, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return bwrap + " did not answer within 10 s";
      }
      if (p.exitValue() != 0) {
        String out = new String(p.getInputStream().readAllBytes()).strip();
        return bwrap + " cannot make a sandbox here (" + out + ")";
      }
      return null;
    } catch (IOException e) {
      return "cannot run " + bwrap + ": " + e.getMessage();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
  }

  private static boolean isRoot() {
    return "root".equals(System.getProperty("user.name"));
  }

  /**
   * The namespaces every attempt gets. As root also a user namespace, in which it is nobody with no
   * capabilities (without one, root in the sandbox could mount its way out).
   */
  private static List<String> namespaces(boolean root, boolean ownNetwork) {
    List<String> ns =
        new ArrayList<>(
            List.of("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"));
    if (ownNetwork) {
      ns.add("--unshare-net");
    }
    if (root) {
      ns.addAll(List.of("--unshare-user", "--uid", "65534", "--gid", "65534"));
    }
    ns.addAll(List.of("--cap-drop", "ALL"));
    return ns;
  }

  /**
   * {@code command} run in a sandbox whose only writable places are {@code dir}'s {@code work} and
   * {@code tmp} ({@code dir}, the attempt's directory at its own path, readable), with {@code
   * env}'s PATH directories and {@code also} (a class data sharing archive, say) readable; with
   * {@code ownNet}, in a network namespace of its own.
   */
  List<String> wrap(
      List<String> command, Path dir, Map<String, String> env, List<Path> also, boolean ownNet) {
    List<String> out = new ArrayList<>(List.of(bwrap));
    out.addAll(namespaces(root, ownNet));
    out.addAll(List.of("--hostname", "oneshot-attempt", "--ro-bind", "/usr", "/usr"));
    for (String top : List.of("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")) {
      Path p = Path.of(top);
      if (Files.isSymbolicLink(p)) {
        try {
          out.addAll(List.of("--symlink", Files.readSymbolicLink(p).toString(), top));
        } catch (IOException e) {
          log.debug("Cannot read the link {}: {}.", p, e.toString());
        }
      } else if (Files.isDirectory(p)) {
        out.addAll(List.of("--ro-bind", top, top));
      }
    }
    for (String etc : ETC) {
      out.addAll(List.of("--ro-bind-try", etc, etc));
    }
    out.addAll(List.of("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"));
    Set<String> ro = new LinkedHashSet<>(readOnly);
    String path = env.get("PATH");
    if (path != null) {
      for (String d : path.split(":")) {
        if (d.startsWith("/") && !d.equals("/usr") && !d.startsWith("/usr/")) {
          ro.add(d);
        }
      }
    }
    for (Path p : also) {
      ro.add(p.toAbsolutePath().toString());
    }
    String own = dir.toAbsolutePath().toString();
    for (String p : ro) {
      if (!p.equals(own) && !p.startsWith(own + "/") && !own.startsWith(p + "/")) {
        out.addAll(List.of("--ro-bind-try", p, p));
      }
    }
    // Its own directory read-only (the attempt file, the token), its work and tmp writable.
    out.addAll(List.of("--ro-bind", own, own));
    for (String rw : List.of("work", "tmp")) {
      out.addAll(List.of("--bind", own + "/" + rw, own + "/" + rw));
    }
    out.addAll(List.of("--chdir", own + "/work", "--"));
    out.addAll(command);
    return out;
  }
}
