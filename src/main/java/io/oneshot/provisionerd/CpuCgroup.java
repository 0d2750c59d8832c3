package io.oneshot.provisionerd;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * The CPU cgroup provisionerd runs in (in a pod: its container's), read for how much the kernel
 * throttled the build for its CPU limit: a build at its limit runs slower without a word on its
 * output, and the count is how its log can say so.
 *
 * <p>cgroup v2: {@code cpu.stat} ({@code nr_periods}, {@code nr_throttled}, {@code throttled_usec})
 * and {@code cpu.max} ({@code QUOTA PERIOD}, or {@code max PERIOD}); v1: the {@code cpu}
 * controller's {@code cpu.stat} ({@code nr_periods}, {@code nr_throttled}, {@code throttled_time}
 * in ns) and {@code cpu.cfs_quota_us} over {@code cpu.cfs_period_us}. Found as {@link MemoryCgroup}
 * is: the cgroup {@code /proc/self/cgroup} names, or the mount itself in a container.
 */
record CpuCgroup(Path stat, Path max, Path quota, Path period) {

  /** What the counters said at one moment. */
  record Sample(long periods, long throttled, double throttledSeconds) {}

  static Optional<CpuCgroup> find() {
    return find(Path.of("/proc/self/cgroup"), Path.of("/sys/fs/cgroup"));
  }

  static Optional<CpuCgroup> find(Path selfCgroup, Path root) {
    return Cgroups.find(
            selfCgroup, root, "cpu", List.of("cpu,cpuacct", "cpu"), "cpu.stat", "cpu.stat")
        .map(
            d ->
                d.v2()
                    ? new CpuCgroup(
                        d.path().resolve("cpu.stat"), d.path().resolve("cpu.max"), null, null)
                    : new CpuCgroup(
                        d.path().resolve("cpu.stat"),
                        null,
                        d.path().resolve("cpu.cfs_quota_us"),
                        d.path().resolve("cpu.cfs_period_us")));
  }

  /** The counters now; empty when they cannot be read. */
  Optional<Sample> sample() {
    long periods = -1;
    long throttled = -1;
    double seconds = -1;
    try {
      for (String line : Files.readAllLines(stat)) {
        String[] kv = line.strip().split("\\s+");
        if (kv.length != 2) {
          continue;
        }
        switch (kv[0]) {
          case "nr_periods" -> periods = Long.parseLong(kv[1]);
          case "nr_throttled" -> throttled = Long.parseLong(kv[1]);
          case "throttled_usec" -> seconds = Long.parseLong(kv[1]) / 1e6;
          case "throttled_time" -> seconds = Long.parseLong(kv[1]) / 1e9;
          default -> {}
        }
      }
    } catch (IOException | NumberFormatException e) {
      return Optional.empty();
    }
    return periods < 0 || throttled < 0 || seconds < 0
        ? Optional.empty()
        : Optional.of(new Sample(periods, throttled, seconds));
  }

  /** The CPU limit in cores, or empty when there is none (or it cannot be read). */
  Optional<Double> limitCores() {
    try {
      if (max != null) {
        String[] v = Files.readString(max).strip().split("\\s+");
        return v[0].equals("max")
            ? Optional.empty()
            : Optional.of(Double.parseDouble(v[0]) / Double.parseDouble(v[1]));
      }
      long q = Long.parseLong(Files.readString(quota).strip());
      long p = Long.parseLong(Files.readString(period).strip());
      return q <= 0 || p <= 0 ? Optional.empty() : Optional.of((double) q / p);
    } catch (IOException | NumberFormatException | ArrayIndexOutOfBoundsException e) {
      return Optional.empty();
    }
  }

  /**
   * A line for the build's log on what throttling it met between two samples, or empty when it met
   * none: "CPU throttled for 12.3 s, in 40% of its scheduling periods (its CPU limit is 500m):
   * rerun it with more: oneshot builds rerun 42 --cpu-limit 1".
   */
  Optional<String> note(Sample before, Sample after, long buildId) {
    long periods = after.periods() - before.periods();
    long throttled = after.throttled() - before.throttled();
    double seconds = after.throttledSeconds() - before.throttledSeconds();
    if (throttled <= 0 || periods <= 0) {
      return Optional.empty();
    }
    Optional<Double> limit = limitCores();
    return Optional.of(
        String.format(
                java.util.Locale.ROOT,
                "CPU throttled for %.1f s, in %d%% of its scheduling periods",
                seconds,
                Math.round(100.0 * throttled / periods))
            + limit
                .map(
                    c ->
                        " (its CPU limit is "
                            + millicores(c)
                            + "): rerun it with more: oneshot builds rerun "
                            + buildId
                            + " --cpu-limit "
                            + millicores(c * 2))
                .orElse(""));
  }

  /** Throttled time between two samples, in seconds (never below 0). */
  static double throttledSeconds(Sample before, Sample after) {
    return Math.max(0, after.throttledSeconds() - before.throttledSeconds());
  }

  static String millicores(double cores) {
    long m = Math.round(cores * 1000);
    return m % 1000 == 0 ? Long.toString(m / 1000) : m + "m";
  }
}
