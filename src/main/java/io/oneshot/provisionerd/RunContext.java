package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.BuildState;
import io.oneshot.build.LogLine;
import io.oneshot.config.Units;
import io.oneshot.process.Signals;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * What a provisioner gets: the build's input, a work directory, the environment for its processes,
 * the log, and {@link #run}, which runs a process to its end or stops it when the build is
 * canceled, times out or provisionerd is terminated.
 */
final class RunContext {
  /** How a process is asked to stop before it is killed. */
  enum Interrupt {
    /** SIGTERM to the process and everything it started (scripts). */
    TERM,
    /** SIGINT to the process alone, which passes it on (terraform). */
    INT
  }

  /** How a process ended; {@code stoppedBy} is null when it ended by itself. */
  record Exit(int code, StopReason stoppedBy) {}

  /** Where a provisioner's state goes while it runs (an upload to the API). */
  interface StateSink {
    void save(String state) throws InterruptedException;
  }

  /** Where a provisioner says that it took its queue source's job (a call to the API). */
  interface JobReporter {
    void tookJob(String what) throws InterruptedException;
  }

  /** Sees each line a process writes; the default sends it to the log as it is. */
  interface LineHandler {
    void line(String stream, String text);
  }

  private final AcquiredBuild build;
  private final Path workDir;
  private final Map<String, String> env;
  private final LogShipper log;
  private final CompletableFuture<StopReason> stop;
  private final StateSink stateSink;
  private final JobReporter jobs;

  RunContext(
      AcquiredBuild build,
      Path workDir,
      Map<String, String> env,
      LogShipper log,
      CompletableFuture<StopReason> stop,
      StateSink stateSink,
      JobReporter jobs) {
    this.jobs = jobs;
    this.build = build;
    this.workDir = workDir;
    this.env = Map.copyOf(env);
    this.log = log;
    this.stop = stop;
    this.stateSink = stateSink;
  }

  AcquiredBuild build() {
    return build;
  }

  JsonNode input() {
    return build.input();
  }

  Path workDir() {
    return workDir;
  }

  /** The environment provisionerd's processes start from (without oneshot's token variables). */
  Map<String, String> env() {
    return env;
  }

  /** Whether the build should stop now (cancel, timeout, SIGTERM, ended elsewhere). */
  boolean stopRequested() {
    return stop.isDone();
  }

  /** Why the build should stop, or null. */
  StopReason stopReason() {
    return stop.getNow(null);
  }

  /** Stores the workspace's state as it is now, as this build's version of it. */
  void saveState(String state) throws InterruptedException {
    stateSink.save(state);
  }

  /** Marks the build as holding its source's job: it no longer counts as waiting for one. */
  void tookJob(String what) throws InterruptedException {
    jobs.tookJob(what);
  }

  /** The result of a build stopped before it ended by itself; the error says why. */
  Provisioner.Result stopped(StopReason why, Integer exitCode) {
    String error =
        switch (why) {
          case CANCELED -> "canceled";
          case TIMED_OUT -> "timed out after " + Units.format(build.timeout());
          case TERMINATED -> "canceled: provisionerd was shut down";
          case LEASE_EXPIRED ->
              "stopped: no heartbeat was accepted for the lease of "
                  + Units.format(build.lease())
                  + ", so the dispatcher may take this attempt for lost";
          case LOST -> "the build ended elsewhere";
        };
    system(why == StopReason.CANCELED ? "warn" : "error", error);
    return new Provisioner.Result(
        why.outcome == null ? BuildState.FAILED : why.outcome, exitCode, error);
  }

  /** Marks a step in the build's timeline (and its log). */
  void milestone(String stage, String text) {
    log.milestone(stage, text);
  }

  /** Masks {@code secret} in every line from now on (a sensitive output's value). */
  void mask(String secret) {
    log.masker().add(secret);
  }

  void system(String level, String text) {
    log.add(LogLine.SYSTEM, level, null, text);
  }

  void line(String stream, String level, String stage, String text) {
    log.add(stream, level, stage, text);
  }

  /**
   * Starts the process, sends its stdout and stderr to the log line by line, and waits for it to
   * end, or for a stop: then it interrupts the process (a script: it and every process it started),
   * goes on reading its output while it cleans up, up to the cancel grace, and kills it and
   * everything it started when the grace ends. The exit code is the process's own when it ended
   * within the grace. A script stays in provisionerd's process group, so that an attempt killed as
   * a whole (its pod deleted, its local process group killed) takes it along.
   */
  Exit run(ProcessBuilder pb, Interrupt interrupt, String stage, LineHandler handler)
      throws IOException, InterruptedException {
    return run(pb, interrupt, stage, handler, p -> {});
  }

  /**
   * {@link #run(ProcessBuilder, Interrupt, String, LineHandler)}, telling {@code started} of it.
   */
  Exit run(
      ProcessBuilder pb,
      Interrupt interrupt,
      String stage,
      LineHandler handler,
      java.util.function.Consumer<Process> started)
      throws IOException, InterruptedException {
    LineHandler h =
        handler != null ? handler : (stream, text) -> log.add(stream, null, stage, text);
    pb.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    Process p = pb.start();
    started.accept(p);
    Thread out = pump(p.getInputStream(), LogLine.STDOUT, h);
    Thread err = pump(p.getErrorStream(), LogLine.STDERR, h);
    StopReason stoppedBy = null;
    try {
      CompletableFuture.anyOf(p.onExit(), stop).get();
    } catch (ExecutionException e) {
      throw new IllegalStateException(e.getCause());
    }
    if (p.isAlive() && stop.isDone()) {
      stoppedBy = stop.getNow(null);
      stopProcess(p, interrupt, stoppedBy);
    }
    int code = p.waitFor();
    out.join(5_000);
    err.join(5_000);
    return new Exit(code, stoppedBy);
  }

  /**
   * Interrupts the process and waits up to the grace for it to exit, then kills what is left. The
   * signals go through {@link Signals}, never {@link Process#destroy()}, which would also close the
   * pipes its output is read from: a script cleaning up would die of SIGPIPE at its first line.
   */
  private void stopProcess(Process p, Interrupt interrupt, StopReason why)
      throws InterruptedException {
    Duration grace = why == StopReason.LOST ? Duration.ZERO : build.cancelGrace();
    String signal = interrupt == Interrupt.INT ? "SIGINT" : "SIGTERM";
    system(
        "warn",
        switch (why) {
              case CANCELED -> "cancel requested";
              case TIMED_OUT -> "the build's time is up";
              case TERMINATED -> "provisionerd is shutting down";
              case LEASE_EXPIRED ->
                  "no heartbeat accepted for the lease of " + Units.format(build.lease());
              case LOST -> "the build ended elsewhere";
            }
            + "; sending "
            + signal
            + " to process "
            + p.pid()
            + (grace.isZero()
                ? ""
                : " and waiting up to " + Units.format(grace) + " before killing it"));
    List<ProcessHandle> tree = p.descendants().toList();
    if (interrupt == Interrupt.INT) {
      if (!Signals.send(p.pid(), Signals.Signal.SIGINT)) {
        system("warn", "could not send SIGINT to process " + p.pid());
      }
    } else {
      terminate(p, tree);
    }
    try {
      p.onExit().get(grace.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException | ExecutionException e) {
      system("warn", "process " + p.pid() + " did not stop within the grace period; killing it");
    }
    // What is left (the process, or what it started and left behind) is killed; its output that
    // is still in the pipes is read to the end.
    List<ProcessHandle> left = p.descendants().toList();
    if (p.isAlive()) {
      p.toHandle().destroyForcibly();
    }
    tree.forEach(ProcessHandle::destroyForcibly);
    left.forEach(ProcessHandle::destroyForcibly);
  }

  /** SIGTERM to the process and every process it started; the pipes stay open. */
  private static void terminate(Process p, List<ProcessHandle> tree) {
    Signals.send(p.pid(), Signals.Signal.SIGTERM);
    tree.forEach(d -> Signals.send(d.pid(), Signals.Signal.SIGTERM));
  }

  /** Reads a stream into log lines, splitting over-long lines at the line limit. */
  private Thread pump(InputStream in, String stream, LineHandler handler) {
    int maxLineBytes = build.maxLineBytes();
    return Thread.ofPlatform()
        .name("provisionerd-" + stream)
        .daemon()
        .start(
            () -> {
              ByteArrayOutputStream line = new ByteArrayOutputStream(256);
              byte[] buf = new byte[8192];
              try (in) {
                int n;
                while ((n = in.read(buf)) > 0) {
                  for (int i = 0; i < n; i++) {
                    byte b = buf[i];
                    if (b == '\n') {
                      emit(line, stream, handler);
                    } else {
                      line.write(b);
                      if (line.size() >= maxLineBytes) {
                        emit(line, stream, handler);
                      }
                    }
                  }
                }
              } catch (IOException e) {
                // the process closed its end
              }
              if (line.size() > 0) {
                emit(line, stream, handler);
              }
            });
  }

  private static void emit(ByteArrayOutputStream line, String stream, LineHandler handler) {
    byte[] bytes = line.toByteArray();
    int len = bytes.length;
    if (len > 0 && bytes[len - 1] == '\r') {
      len--;
    }
    line.reset();
    handler.line(stream, new String(bytes, 0, len, StandardCharsets.UTF_8));
  }
}
