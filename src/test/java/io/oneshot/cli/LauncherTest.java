package io.oneshot.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The jar's entry point, run by the Java a user has: too old, it says what to install. */
class LauncherTest {
  private record Run(int code, String out, String err) {}

  private static Run run(Path java, String... args) throws Exception {
    Path out = Files.createTempFile("launcher", ".out");
    Path err = Files.createTempFile("launcher", ".err");
    List<String> cmd =
        Stream.concat(
                Stream.of(
                    java.toString(),
                    "-cp",
                    System.getProperty("java.class.path"),
                    "io.oneshot.cli.Launcher"),
                Stream.of(args))
            .toList();
    try {
      Process p =
          new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile()).start();
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
      return new Run(
          p.exitValue(),
          Files.readString(out, StandardCharsets.UTF_8),
          Files.readString(err, StandardCharsets.UTF_8));
    } finally {
      Files.deleteIfExists(out);
      Files.deleteIfExists(err);
    }
  }

  /** A Java older than 21 installed beside this one (Debian's OpenJDK 17 on our machines). */
  private static Optional<Path> olderJava() throws IOException {
    Path jvms = Path.of("/usr/lib/jvm");
    if (!Files.isDirectory(jvms)) {
      return Optional.empty();
    }
    try (Stream<Path> s = Files.list(jvms)) {
      return s.filter(d -> d.getFileName().toString().matches(".*-(8|11|17)(-.*|\\.0.*)?"))
          .map(d -> d.resolve("bin/java"))
          .filter(Files::isExecutable)
          .sorted(Comparator.naturalOrder())
          .findFirst();
    }
  }

  @Test
  void anOlderJavaIsToldWhatToInstallAndNothingElseRuns() throws Exception {
    Optional<Path> old = olderJava();
    assumeTrue(old.isPresent(), "no Java older than 21 in /usr/lib/jvm");
    Run r = run(old.get(), "--version");
    assertThat(r.code()).isEqualTo(Main.USAGE);
    assertThat(r.out()).isEmpty();
    assertThat(r.err())
        .startsWith("error: oneshot needs Java 21 or newer; this is Java ")
        .contains("docs/install.md")
        .doesNotContain("UnsupportedClassVersionError");
  }

  @Test
  void aCurrentJavaRunsTheCommand() throws Exception {
    Run r = run(Path.of(System.getProperty("java.home"), "bin", "java"), "--version");
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out()).startsWith("oneshot ");
  }
}
