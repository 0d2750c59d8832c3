package io.oneshot.launch.local;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.ChildJvm;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A class data sharing archive shared by processes started at once: each writes a copy of its own
 * until one is in place, and a process only ever maps a finished one.
 */
class SharedArchiveTest {
  @TempDir Path dir;

  private List<String> command(String... main) {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-Xshare:auto");
    cmd.add(SharedArchive.AUTO_CREATE);
    cmd.add(SharedArchive.FILE + dir.resolve("p.jsa"));
    cmd.add("-cp");
    cmd.add(String.join(File.pathSeparator, ChildJvm.classPath()));
    cmd.addAll(List.of(main));
    return cmd;
  }

  /** Runs {@code command} with {@code use}'s flags where the archive flags were; its exit code. */
  private static int run(SharedArchive.Command c, SharedArchive.Use use, String... extra)
      throws Exception {
    List<String> cmd = new ArrayList<>(c.with(use));
    cmd.addAll(1, List.of(extra));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    p.getInputStream().transferTo(java.io.OutputStream.nullOutputStream());
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    return p.exitValue();
  }

  @Test
  void processesWriteTheArchiveToFilesOfTheirOwnAndMapItOnlyOnceWhole() throws Exception {
    SharedArchive.Command c = SharedArchive.takeOver(command("io.oneshot.cli.Main", "--version"));
    SharedArchive archive = c.archive();
    assertThat(c.command())
        .doesNotContain(SharedArchive.AUTO_CREATE)
        .noneMatch(a -> a.startsWith(SharedArchive.FILE));
    assertThat(c.at()).isEqualTo(2);
    assertThat(archive.file().getParent()).isEqualTo(dir);
    assertThat(archive.file().getFileName().toString()).matches("p-[0-9a-f]{12}\\.jsa");

    SharedArchive.Use first = archive.next();
    SharedArchive.Use second = archive.next();
    for (SharedArchive.Use writer : List.of(first, second)) {
      assertThat(writer.writes()).isNotNull().isNotEqualTo(archive.file());
      assertThat(writer.flags())
          .containsExactly(SharedArchive.AUTO_CREATE, SharedArchive.FILE + writer.writes());
    }
    assertThat(first.writes()).isNotEqualTo(second.writes());

    assertThat(run(c, first)).isZero();
    assertThat(run(c, second)).isZero();
    assertThat(first.writes()).as("written by the JVM at its exit").isNotEmptyFile();
    assertThat(archive.file()).as("not in place before a writer exited").doesNotExist();

    archive.exited(first, 0);
    assertThat(archive.file()).isNotEmptyFile();
    assertThat(first.writes()).doesNotExist();
    archive.exited(second, 0);
    assertThat(second.writes()).doesNotExist();
    SharedArchive.Use reader = archive.next();
    assertThat(reader.flags()).containsExactly(SharedArchive.FILE + archive.file());
    assertThat(reader.writes()).isNull();
    // -Xshare:on: the JVM refuses to start if it cannot map the archive.
    assertThat(run(c, reader, "-Xshare:on")).isZero();
    try (var files = Files.list(dir)) {
      assertThat(files).containsExactly(archive.file());
    }
  }

  /**
   * A writer killed or crashed may have written part of its file: nothing of it is put in place,
   * and the next process writes the archive again.
   */
  @Test
  void aWriterThatDidNotRunItsExitLeavesNothingAndTheNextOneWrites() throws Exception {
    SharedArchive archive = SharedArchive.takeOver(command("x")).archive();
    for (int code : new int[] {-1, 128 + 9, 128 + 6, 128 + 11}) {
      SharedArchive.Use writer = archive.next();
      assertThat(writer.writes()).isNotNull();
      Files.write(writer.writes(), new byte[] {1, 2, 3});
      archive.exited(writer, code);
      assertThat(archive.file()).as("after exit code %d", code).doesNotExist();
      assertThat(writer.writes()).doesNotExist();
    }
    for (int code : new int[] {0, 1, 2, 128 + 2, 128 + 15}) {
      assertThat(SharedArchive.wroteWhole(code)).as("exit code %d", code).isTrue();
    }
    assertThat(archive.next().writes()).isNotNull();
  }

  /**
   * The archive's name changes with the JVM's command and with its jars, so that a new oneshot or
   * JDK writes one of its own: the JVM ignores one made for other jars without a word.
   */
  @Test
  void theArchiveIsNamedForTheCommandAndItsJars() throws Exception {
    Path jar = Files.write(dir.resolve("a.jar"), new byte[] {1});
    List<String> cmd = List.of("java", "-Xmx64m", "-cp", jar.toString(), "Main");
    String first = SharedArchive.fingerprint(cmd);
    assertThat(SharedArchive.fingerprint(cmd)).isEqualTo(first);
    assertThat(SharedArchive.fingerprint(List.of("java", "-Xmx32m", "-cp", jar.toString(), "Main")))
        .isNotEqualTo(first);
    Files.write(jar, new byte[] {1, 2});
    assertThat(SharedArchive.fingerprint(cmd)).isNotEqualTo(first);
    assertThat(SharedArchive.takeOver(List.of("java", "-cp", "x", "Main")).archive())
        .as("a command without the archive flags")
        .isNull();
  }

  /**
   * A new command's archive takes the place of what earlier commands of the same name left: their
   * archives, the one named before archives carried a fingerprint, and writers' files nobody moved
   * into place; a writer's file still fresh and files of other names stay.
   */
  @Test
  void earlierArchivesAndAbandonedWritersFilesAreDeletedOthersStay() throws Exception {
    List<String> cmd = command("x");
    SharedArchive current = SharedArchive.takeOver(cmd).archive();
    String now = current.file().getFileName().toString();
    Path earlier = Files.write(dir.resolve("p-0123456789ab.jsa"), new byte[] {1});
    Path unnamed = Files.write(dir.resolve("p.jsa"), new byte[] {1});
    Path abandoned = Files.write(dir.resolve(now + "." + UUID.randomUUID() + ".tmp"), new byte[1]);
    Path abandonedEarlier =
        Files.write(dir.resolve("p-0123456789ab.jsa." + UUID.randomUUID() + ".tmp"), new byte[1]);
    FileTime longAgo =
        FileTime.from(Instant.now().minus(SharedArchive.LEFT_WRITING).minus(Duration.ofMinutes(1)));
    Files.setLastModifiedTime(abandoned, longAgo);
    Files.setLastModifiedTime(abandonedEarlier, longAgo);
    Path writing = Files.write(dir.resolve(now + "." + UUID.randomUUID() + ".tmp"), new byte[1]);
    Path inPlace = Files.write(current.file(), new byte[] {1});
    List<Path> others =
        List.of(
            Files.write(dir.resolve("q-0123456789ab.jsa"), new byte[] {1}),
            Files.write(dir.resolve("p-notes.jsa"), new byte[] {1}),
            Files.write(dir.resolve("p.jsa.txt"), new byte[] {1}));
    for (Path p : others) {
      Files.setLastModifiedTime(p, longAgo);
    }

    SharedArchive again = SharedArchive.takeOver(cmd).archive();

    assertThat(again.file()).isEqualTo(inPlace).isNotEmptyFile();
    assertThat(List.of(earlier, unnamed, abandoned, abandonedEarlier)).noneMatch(Files::exists);
    assertThat(writing).as("a writer's file still fresh").exists();
    assertThat(others).allMatch(Files::exists);
    Path notYet = dir.resolve("not-yet").resolve("p.jsa");
    assertThat(
            SharedArchive.takeOver(
                    List.of("java", SharedArchive.AUTO_CREATE, SharedArchive.FILE + notYet))
                .archive()
                .file()
                .getParent())
        .as("a directory not made yet, as the local launcher's on a first start")
        .isEqualTo(notYet.getParent());
  }
}
