package io.oneshot.provisionerd;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The peak resident memory of a process and everything it starts, sampled from {@code /proc} every
 * 100 ms while it runs: what a stage (an install step) needed of the pod's memory, which the pod's
 * own cgroup cannot say per stage.
 */
final class PeakMemory {
  private final AtomicLong peakBytes = new AtomicLong(-1);
  private volatile Thread sampler;
  private volatile boolean stopped;

  /** Starts sampling {@code p} and its descendants until it exits or {@link #stop} is called. */
  void watch(Process p) {
    sampler =
        Thread.ofPlatform()
            .name("provisionerd-memory")
            .daemon()
            .start(
                () -> {
                  while (!stopped && p.isAlive()) {
                    long sum = rss(p.pid());
                    for (ProcessHandle d : p.descendants().toList()) {
                      long r = rss(d.pid());
                      sum += Math.max(0, r);
                    }
                    if (sum > 0) {
                      peakBytes.accumulateAndGet(sum, Math::max);
                    }
                    try {
                      Thread.sleep(100);
                    } catch (InterruptedException e) {
                      return;
                    }
                  }
                });
  }

  void stop() {
    stopped = true;
    Thread t = sampler;
    if (t != null) {
      t.interrupt();
      try {
        t.join(1_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** The peak seen in bytes, or -1 when none could be read. */
  long peakBytes() {
    return peakBytes.get();
  }

  /** ", peak memory N MiB", or nothing when it could not be read. */
  String describe() {
    long b = peakBytes.get();
    return b <= 0 ? "" : ", peak memory " + Math.max(1, Math.round(b / 1048576.0)) + " MiB";
  }

  /** A process's resident set in bytes ({@code VmRSS} of /proc/PID/status), or -1. */
  static long rss(long pid) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
        if (line.startsWith("VmRSS:")) {
          String[] parts = line.substring(6).trim().split("\\s+");
          return Long.parseLong(parts[0]) * 1024;
        }
      }
    } catch (IOException | RuntimeException e) {
      // gone, or not Linux
    }
    return -1;
  }
}
