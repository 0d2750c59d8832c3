package io.oneshot.testing;

import io.oneshot.launch.local.LocalCommand;
import io.oneshot.launch.local.SharedArchive;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;
import java.util.zip.Deflater;

/**
 * The class path and class data sharing flags for the JVMs a test starts (provisionerd, the
 * dispatchers, the fake Coder daemon), so that they start as the image and the local launcher start
 * provisionerd: from jars, mapping an archive of the classes the first of their kind loaded.
 *
 * <p>The JVM archives classes from jars only, and the test class path holds the class directories:
 * without this every child loaded its classes one file at a time ({@code scripts/bench --only
 * provisionerd}: 747 ms of overhead a build from the directories, 418 ms from the jar with its
 * archive). Each class directory is packed into a jar once per test JVM, in a directory of its own
 * ({@code -Doneshot.test.jvmDir} names it, as {@code scripts/mutate} does for each break so that it
 * can find the processes a break left), deleted when the JVM exits.
 */
public final class ChildJvm {
  private ChildJvm() {}

  private static Path dir;
  private static List<String> classPath;

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(ChildJvm::delete));
  }

  /**
   * This JVM's class path for a child JVM: every entry absolute, every class directory as a jar.
   */
  public static synchronized List<String> classPath() {
    if (classPath == null) {
      List<String> out = new ArrayList<>();
      int i = 0;
      for (String entry : LocalCommand.absoluteClassPath()) {
        Path p = Path.of(entry);
        out.add(Files.isDirectory(p) ? jar(p, dir().resolve("classes-" + i++ + ".jar")) : entry);
      }
      classPath = List.copyOf(out);
    }
    return classPath;
  }

  /**
   * The flags that let every child of one kind write the archive in place at its exit when it found
   * none, which {@link #sharedArchive} takes over.
   */
  private static List<String> archiveOptions(String kind) {
    return List.of(
        "-Xshare:auto", "-XX:+AutoCreateSharedArchive", "-XX:SharedArchiveFile=" + archive(kind));
  }

  /**
   * The archive the children of one kind share ({@link SharedArchive}): until it is there, each
   * writes a copy to a file of its own, the first moved into place whole after its exit, where a
   * child writing it in place at its exit can crash another that maps it meanwhile.
   */
  public static synchronized SharedArchive sharedArchive(String kind) {
    return shared.computeIfAbsent(
        kind,
        k -> {
          List<String> cmd = new ArrayList<>();
          cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
          cmd.addAll(archiveOptions(k));
          cmd.add("-cp");
          cmd.add(String.join(java.io.File.pathSeparator, classPath()));
          return SharedArchive.takeOver(cmd).archive();
        });
  }

  private static final Map<String, SharedArchive> shared = new HashMap<>();

  /**
   * Writes at {@code at} an executable shell script that runs {@code cmd} (each word quoted) with
   * the script's own arguments after it, the command taking the shell's process.
   */
  public static Path execScript(Path at, List<String> cmd) throws IOException {
    StringBuilder sh = new StringBuilder("#!/bin/sh\nexec");
    for (String a : cmd) {
      sh.append(" '").append(a.replace("'", "'\\''")).append('\'');
    }
    sh.append(" \"$@\"\n");
    Files.writeString(at, sh.toString());
    Files.setPosixFilePermissions(at, PosixFilePermissions.fromString("rwxr-xr-x"));
    return at;
  }

  /**
   * SIGKILL, and waits for the end. A JVM that something attached to ({@code jcmd}) keeps a socket
   * for it in /tmp, where HotSpot puts it on Linux, and deletes it only at a normal exit: a killed
   * one would leave it behind, so it goes here.
   */
  public static void kill(Process p) throws InterruptedException {
    p.destroyForcibly();
    p.waitFor();
    try {
      Files.deleteIfExists(attachSocket(p.pid()));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Where a JVM of this process id listens for {@code jcmd} once one attached. */
  static Path attachSocket(long pid) {
    return Path.of("/tmp", ".java_pid" + pid);
  }

  /** The archive of the children of one kind. */
  public static Path archive(String kind) {
    return dir().resolve(kind + ".jsa");
  }

  /** Where the jars and the archives are. */
  private static synchronized Path dir() {
    if (dir == null) {
      try {
        String named = System.getProperty("oneshot.test.jvmDir");
        dir =
            named != null && !named.isBlank()
                ? Files.createDirectories(Path.of(named).toAbsolutePath())
                : TempDirs.make("oneshot-test-jvm");
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    return dir;
  }

  private static String jar(Path classes, Path jar) {
    // Stored, not compressed: the children read every class, and packing is a one-off.
    try (OutputStream file = Files.newOutputStream(jar);
        JarOutputStream out = new JarOutputStream(file);
        Stream<Path> files = Files.walk(classes)) {
      out.setLevel(Deflater.NO_COMPRESSION);
      for (Path f : files.filter(Files::isRegularFile).sorted().toList()) {
        out.putNextEntry(new JarEntry(classes.relativize(f).toString().replace('\\', '/')));
        Files.copy(f, out);
        out.closeEntry();
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot pack " + classes + " into " + jar, e);
    }
    return jar.toString();
  }

  /**
   * Deletes the jars and archives (at exit, and before a halt that skips the exit's hooks: {@link
   * FirstFailure}).
   */
  public static synchronized void delete() {
    if (dir == null) {
      return;
    }
    // A child may still be writing its archive: what is left stays, in a temporary directory or in
    // the directory scripts/mutate clears before the break runs again.
    TempDirs.delete(dir);
  }
}
