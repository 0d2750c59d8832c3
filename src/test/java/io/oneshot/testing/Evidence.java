package io.oneshot.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;

/**
 * Where a test that runs whole dispatcher processes keeps their logs: under {@code
 * target/evidence/<test class>/<start time>/}, so that they outlive the test and a failure that
 * happens once in many runs can still be read afterwards.
 */
public final class Evidence {
  private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss-SSS");

  private Evidence() {}

  /** A new, empty directory for one run of {@code test}. */
  public static Path dir(Class<?> test) {
    Path d =
        Path.of("target", "evidence", test.getSimpleName(), LocalDateTime.now().format(STAMP))
            .toAbsolutePath();
    try {
      return Files.createDirectories(d);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
