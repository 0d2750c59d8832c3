package io.oneshot.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * Temporary directories made by the tests and the benchmark outside JUnit's {@code @TempDir}, and
 * removed by whoever made them once done: a test run or a benchmark leaves nothing behind in the
 * machine's temporary directory, where CI runs one after another.
 */
public final class TempDirs {
  private TempDirs() {}

  /** A new directory in the system's temporary directory, its name starting with {@code prefix}. */
  public static Path make(String prefix) {
    try {
      return Files.createTempDirectory(prefix);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot make a temporary directory " + prefix + "*", e);
    }
  }

  /**
   * Deletes {@code dir} and everything in it, symbolic links as links (never what they point to).
   * What cannot go (a process still writing there) stays.
   */
  public static void delete(Path dir) {
    if (dir == null) {
      return;
    }
    try (Stream<Path> walk = Files.walk(dir)) {
      List<Path> all = walk.sorted(Comparator.reverseOrder()).toList();
      for (Path p : all) {
        Files.deleteIfExists(p);
      }
    } catch (IOException | UncheckedIOException e) {
      // gone already, or something in it could not be deleted
    }
  }
}
