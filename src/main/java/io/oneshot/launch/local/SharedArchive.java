package io.oneshot.launch.local;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The class data sharing archive the provisionerd processes of one command share: each maps it once
 * it exists, and until then each writes a copy of its own at its exit, the first one whole put in
 * place for the others.
 *
 * <p>The JVM writes a dynamic archive ({@code -XX:+AutoCreateSharedArchive}) at its exit, in place,
 * and every JVM that started without a usable archive writes it again; a JVM that maps the file
 * while another writes it can crash before {@code main} (JDK 25: SIGABRT in {@code
 * AOTClassLocationConfig::validate}, exit code 134). With several provisionerd starting at once,
 * one build failed so on all three of its attempts. So each writer writes a file of its own, moved
 * into place whole once it has exited, and a process only ever maps a finished archive.
 *
 * <p>The archive's name carries a fingerprint of the command and of its class path's jars: the JVM
 * ignores, without a word, an archive made by another JDK or for other jars, so a new oneshot or a
 * new JDK writes an archive of its own instead of starting without one.
 */
public final class SharedArchive {
  private static final Logger log = LoggerFactory.getLogger(SharedArchive.class);

  static final String AUTO_CREATE = "-XX:+AutoCreateSharedArchive";
  static final String FILE = "-XX:SharedArchiveFile=";

  /** A writer's own file left this long was left by a writer nobody watched to its end. */
  static final Duration LEFT_WRITING = Duration.ofHours(1);

  private final Path file;
  private final String base;

  /**
   * What one process is started with ({@code flags}, among the JVM's options) and the file it
   * writes at its exit (null: none).
   */
  public record Use(List<String> flags, Path writes) {}

  /**
   * A command with its archive flags taken out, where they were ({@code at}), and the archive they
   * named (null: the command had none).
   */
  public record Command(List<String> command, int at, SharedArchive archive) {
    /** The flags for the next process ({@link SharedArchive#next}); null without an archive. */
    public Use next() {
      return archive == null ? null : archive.next();
    }

    /** The command with {@code use}'s flags where the archive flags were (none for null). */
    public List<String> with(Use use) {
      if (use == null) {
        return command;
      }
      List<String> out = new ArrayList<>(command);
      out.addAll(at, use.flags());
      return out;
    }
  }

  /**
   * The archive named {@code requested} (its fingerprint is added to the name) for the processes
   * {@code command} starts.
   */
  SharedArchive(Path requested, List<String> command) {
    String name = requested.getFileName().toString();
    int dot = name.endsWith(".jsa") ? name.length() - 4 : name.length();
    this.base = name.substring(0, dot);
    this.file =
        requested
            .toAbsolutePath()
            .resolveSibling(
                name.substring(0, dot) + "-" + fingerprint(command) + name.substring(dot));
  }

  /**
   * Takes the archive flags ({@code -XX:+AutoCreateSharedArchive} with {@code
   * -XX:SharedArchiveFile=}) out of {@code command}, so that each process started from it gets its
   * own from {@link #next}. A command without both is left as it is, with no archive.
   */
  public static Command takeOver(List<String> command) {
    int auto = command.indexOf(AUTO_CREATE);
    Optional<String> named = command.stream().filter(a -> a.startsWith(FILE)).findFirst();
    if (auto < 0 || named.isEmpty()) {
      return new Command(List.copyOf(command), -1, null);
    }
    List<String> rest = new ArrayList<>(command);
    rest.remove(AUTO_CREATE);
    rest.remove(named.get());
    int at = Math.min(auto, command.indexOf(named.get()));
    SharedArchive archive =
        new SharedArchive(Path.of(named.get().substring(FILE.length())), List.copyOf(rest));
    archive.sweep();
    return new Command(List.copyOf(rest), at, archive);
  }

  /**
   * Deletes what earlier commands of the same name left beside this archive: their archives (made
   * for another oneshot, JDK or set of options, which no process of this command can map) and
   * writers' own files that nobody moved into place, their dispatcher gone before the writer ended.
   * A writer's file appears at its exit and is moved or deleted within moments, so one older than
   * {@link #LEFT_WRITING} is one of those. An archive that a process still maps stays mapped,
   * deleted or not. Without this, each new build of oneshot run on the same directory ({@code
   * oneshot dev}) left its archive there for good.
   */
  void sweep() {
    Pattern ours =
        Pattern.compile(Pattern.quote(base) + "(-[0-9a-f]{12})?\\.jsa(\\.[0-9a-f-]{36}\\.tmp)?");
    Instant stale = Instant.now().minus(LEFT_WRITING);
    long freed = 0;
    int deleted = 0;
    try (DirectoryStream<Path> in = Files.newDirectoryStream(file.getParent())) {
      for (Path p : in) {
        Matcher m = ours.matcher(p.getFileName().toString());
        if (!m.matches() || p.equals(file)) {
          continue;
        }
        try {
          BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class);
          boolean writing = m.group(2) != null;
          if (!a.isRegularFile() || writing && a.lastModifiedTime().toInstant().isAfter(stale)) {
            continue;
          }
          if (Files.deleteIfExists(p)) {
            freed += a.size();
            deleted++;
          }
        } catch (IOException e) {
          log.debug("Cannot delete {}: {}.", p, e.toString());
        }
      }
    } catch (NoSuchFileException e) {
      return; // no directory yet: nothing was left
    } catch (IOException e) {
      log.debug("Cannot look for earlier archives beside {}: {}.", file, e.toString());
    }
    if (deleted > 0) {
      log.info(
          "Deleted {} class data sharing archive(s) of earlier provisionerd commands beside {} ({}"
              + " MiB).",
          deleted,
          file,
          freed >> 20);
    }
  }

  /** Where the finished archive is (or will be). */
  public Path file() {
    return file;
  }

  /**
   * The flags for the next process: the archive once it exists; until then, the flags that make
   * this process write one at its exit, to a file of its own.
   */
  public Use next() {
    if (Files.isRegularFile(file)) {
      return new Use(List.of(FILE + file), null);
    }
    Path own = file.resolveSibling(file.getFileName() + "." + UUID.randomUUID() + ".tmp");
    return new Use(List.of(AUTO_CREATE, FILE + own), own);
  }

  /**
   * The flags that map the archive, once it exists; null before (start without it): for processes
   * that must not write one (a sandboxed attempt, whose build could leave a doctored archive for
   * the next provisionerd to map).
   */
  public Use reader() {
    return Files.isRegularFile(file) ? new Use(List.of(FILE + file), null) : null;
  }

  /**
   * Puts {@code process}'s archive, if it writes one ({@code use}), in place once it has exited.
   */
  public void watch(Use use, Process process) {
    if (use.writes() != null) {
      process.onExit().thenRun(() -> exited(use, process.exitValue()));
    }
  }

  /**
   * A process started with {@code use} exited with {@code exitCode} (-1: no code). A writer that
   * exited as a JVM exits, its own way or on SIGINT or SIGTERM, has written its archive whole, and
   * it is moved into place unless another got there first; one killed or crashed may have written
   * part of it. Either way, nothing of the writer's own file is left.
   */
  void exited(Use use, int exitCode) {
    Path own = use.writes();
    if (own == null) {
      return;
    }
    try {
      if (wroteWhole(exitCode)
          && !Files.exists(file)
          && Files.isRegularFile(own)
          && Files.size(own) > 0) {
        Files.move(own, file, StandardCopyOption.ATOMIC_MOVE);
        log.debug("Class data sharing archive {} written.", file);
      }
    } catch (IOException e) {
      log.debug("Cannot put the class data sharing archive {} in place: {}.", own, e.toString());
    } finally {
      try {
        Files.deleteIfExists(own);
      } catch (IOException e) {
        log.debug("Cannot delete {}: {}.", own, e.toString());
      }
    }
  }

  /** Whether a JVM that exited so ran its exit: not killed (SIGKILL) and not crashed. */
  static boolean wroteWhole(int exitCode) {
    return exitCode >= 0 && (exitCode < 128 || exitCode == 128 + 2 || exitCode == 128 + 15);
  }

  /**
   * The command and, for each jar or directory of its class path, its size and time of change: an
   * archive is good for the JVM, options and classes it was made with.
   */
  static String fingerprint(List<String> command) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      for (int i = 0; i < command.size(); i++) {
        String arg = command.get(i);
        sha.update(arg.getBytes(StandardCharsets.UTF_8));
        sha.update((byte) 0);
        boolean classPath =
            arg.equals("-cp") || arg.equals("-classpath") || arg.equals("--class-path");
        if (classPath && i + 1 < command.size()) {
          for (String entry : command.get(i + 1).split(File.pathSeparator)) {
            Path p = Path.of(entry);
            try {
              sha.update(
                  (Files.size(p) + ":" + Files.getLastModifiedTime(p).toMillis())
                      .getBytes(StandardCharsets.UTF_8));
            } catch (IOException e) {
              sha.update((byte) 1);
            }
          }
        }
      }
      return HexFormat.of().formatHex(sha.digest(), 0, 6);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
