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
  private boolean emptyBefore;
  private volatile int looks;
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
                    while (!check(false)) {
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
    check(true);
  }

  /** Whether the watch's thread still runs (for tests). */
  boolean watching() {
    Thread t = thread;
    return t != null && t.isAlive();
  }

  /** How many times the watch has looked (for tests). */
  int looks() {
    return looks;
  }

  /**
   * Reports the job taken once the file exists; true once reported. A file found empty while the
   * script runs may be one a writer has created and not yet written ({@code echo ... > file}): it
   * is reported at the next look, with its first line if it has one by then, or at the last look.
   */
  private synchronized boolean check(boolean last) throws InterruptedException {
    looks++;
    if (reported || !Files.exists(file)) {
      return reported;
    }
    String first = null;
    try {
      first = Files.readString(file, StandardCharsets.UTF_8).lines().findFirst().orElse("");
    } catch (IOException e) {
      // the file is there: that says it all
    }
    if (first != null && first.isEmpty() && !emptyBefore && !last) {
      emptyBefore = true;
      return false;
    }
    reported = true;
    String what = "took a job";
    if (first != null && !first.isBlank()) {
      what = "took a job: " + (first.length() > 200 ? first.substring(0, 200) : first.strip());
    }
    report.taken(what);
    return true;
  }
}
