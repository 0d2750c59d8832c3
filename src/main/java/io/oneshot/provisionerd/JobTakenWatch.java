package io.oneshot.provisionerd;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Watches for a script's "job taken" file ({@link ScriptProvisioner#JOB_TAKEN_ENV}) while the
 * script runs, and once more when it ends; reports it once. The watch ends the moment the script
 * does: one that slept out its interval first held up every script build's completion by up to that
 * long.
 */
final class JobTakenWatch {
  /** How often the file is looked for while the script runs. */
  static final Duration EVERY = Duration.ofMillis(100);

  /** Told once, with what the job was ("took a job: ..."). */
  interface Report {
    void taken(String what) throws InterruptedException;
  }

  private final Path file;
  private final Duration every;
  private final Report report;
  private final CountDownLatch stopped = new CountDownLatch(1);
  private boolean reported;
  private volatile Thread thread;

  JobTakenWatch(Path file, Duration every, Report report) {
    this.file = file;
    this.every = every;
    this.report = report;
  }

  void start() {
    thread =
        Thread.ofPlatform()
            .name("provisionerd-job-taken")
            .daemon()
            .start(
                () -> {
                  try {
                    while (!check()) {
                      if (stopped.await(every.toMillis(), TimeUnit.MILLISECONDS)) {
                        return; // stop() looks once more
                      }
                    }
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  }
                });
  }

  /** The script ended: the watch stops at once, after one last look for the file. */
  void stop() throws InterruptedException {
    stopped.countDown();
    Thread t = thread;
    if (t != null) {
      t.join(5_000);
    }
    check();
  }

  /** Whether the watch's thread still runs (for tests). */
  boolean watching() {
    Thread t = thread;
    return t != null && t.isAlive();
  }

  /** Reports the job taken once the file exists; true once reported. */
  private synchronized boolean check() throws InterruptedException {
    if (reported || !Files.exists(file)) {
      return reported;
    }
    reported = true;
    String what = "took a job";
    try {
      String first = Files.readString(file, StandardCharsets.UTF_8).lines().findFirst().orElse("");
      if (!first.isBlank()) {
        what = "took a job: " + (first.length() > 200 ? first.substring(0, 200) : first.strip());
      }
    } catch (IOException e) {
      // the file is there: that says it all
    }
    report.taken(what);
    return true;
  }
}
