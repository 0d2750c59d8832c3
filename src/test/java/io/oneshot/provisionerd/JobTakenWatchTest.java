package io.oneshot.provisionerd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The watch for a script's "job taken" file: reported once, and never in the way of the end. */
class JobTakenWatchTest {
  @TempDir Path dir;

  private final List<String> reported = new CopyOnWriteArrayList<>();

  /** The file the script writes. */
  private Path taken() {
    return dir.resolve("taken");
  }

  /** A watch on {@link #taken()}, started, looking every {@code every}. */
  private JobTakenWatch started(Duration every) {
    JobTakenWatch watch = new JobTakenWatch(taken(), every, reported::add);
    watch.start();
    return watch;
  }

  /**
   * The script's end stops the watch at once, however long its interval: the build's completion
   * waits for that stop. With an hour between looks, a watch that slept its interval out would
   * still run after stop() gave up waiting for it.
   */
  @Test
  void theScriptsEndStopsTheWatchAtOnceWhateverItsInterval() throws Exception {
    JobTakenWatch watch = started(Duration.ofHours(1));
    await().atMost(10, TimeUnit.SECONDS).until(watch::watching);

    watch.stop();

    assertThat(watch.watching()).isFalse();
    assertThat(reported).isEmpty();
  }

  @Test
  void aFileWrittenWhileTheScriptRunsIsReportedOnceWithItsFirstLine() throws Exception {
    JobTakenWatch watch = started(Duration.ofMillis(10));
    Files.writeString(taken(), "workspace build 42\nmore\n");
    await().atMost(10, TimeUnit.SECONDS).until(() -> !reported.isEmpty());

    watch.stop();

    assertThat(reported).containsExactly("took a job: workspace build 42");
  }

  /**
   * Created, then written a moment later (a shell's {@code >} does both): a look between the two
   * finds it empty, and the first line still goes with the report.
   */
  @Test
  void aFileFoundEmptyAndWrittenAMomentLaterIsReportedWithItsFirstLine() throws Exception {
    Files.writeString(taken(), "");
    JobTakenWatch watch = started(Duration.ofHours(1));
    await().atMost(10, TimeUnit.SECONDS).until(() -> watch.looks() >= 1);
    assertThat(reported).isEmpty();
    Files.writeString(taken(), "workspace build 7\n");

    watch.stop();

    assertThat(reported).containsExactly("took a job: workspace build 7");
  }

  /** Left empty while the script goes on: reported at the next look, not only at the end. */
  @Test
  void aFileLeftEmptyIsReportedWhileTheScriptRuns() throws Exception {
    Files.writeString(taken(), "");
    JobTakenWatch watch = started(Duration.ofMillis(10));

    await().atMost(10, TimeUnit.SECONDS).until(() -> !reported.isEmpty());
    assertThat(reported).containsExactly("took a job");
    watch.stop();
    assertThat(reported).hasSize(1);
  }

  /** Written just before the script ended, between two looks: the last look at stop() finds it. */
  @Test
  void aFileWrittenJustBeforeTheEndIsFoundByTheLastLook() throws Exception {
    JobTakenWatch watch = started(Duration.ofHours(1));
    await().atMost(10, TimeUnit.SECONDS).until(watch::watching);
    Files.writeString(taken(), "");

    watch.stop();

    assertThat(reported).containsExactly("took a job");
  }
}
