package io.oneshot.provisionerd;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The CPU cgroup's throttling counters and limit, as the kernel writes them (v2 and v1). */
class CpuCgroupTest {
  @TempDir Path tmp;

  private Path write(String rel, String text) throws IOException {
    Path p = tmp.resolve(rel);
    Files.createDirectories(p.getParent());
    Files.writeString(p, text);
    return p;
  }

  @Test
  void cgroupV2CountsThrottledPeriodsAndTimeAndReadsTheLimit() throws IOException {
    Path self = write("proc/self/cgroup", "0::/\n");
    Path stat =
        write(
            "sys/cpu.stat",
            "usage_usec 5000000\nuser_usec 4000000\nsystem_usec 1000000\nnr_periods 100\n"
                + "nr_throttled 10\nthrottled_usec 500000\n");
    write("sys/cpu.max", "50000 100000\n");
    CpuCgroup c = CpuCgroup.find(self, tmp.resolve("sys")).orElseThrow();
    CpuCgroup.Sample before = c.sample().orElseThrow();
    assertThat(before).isEqualTo(new CpuCgroup.Sample(100, 10, 0.5));
    assertThat(c.limitCores()).contains(0.5);
    Files.writeString(
        stat, "usage_usec 9000000\nnr_periods 200\nnr_throttled 50\nthrottled_usec 12800000\n");
    CpuCgroup.Sample after = c.sample().orElseThrow();
    assertThat(CpuCgroup.throttledSeconds(before, after)).isEqualTo(12.3);
    assertThat(c.note(before, after, 42))
        .contains(
            "CPU throttled for 12.3 s, in 40% of its scheduling periods (its CPU limit is 500m):"
                + " rerun it with more: oneshot builds rerun 42 --cpu-limit 1");
    assertThat(c.note(after, after, 42)).as("not throttled since").isEmpty();
    Files.writeString(tmp.resolve("sys/cpu.max"), "max 100000\n");
    assertThat(c.limitCores()).isEmpty();
    assertThat(c.note(before, after, 42).orElseThrow()).endsWith("of its scheduling periods");
  }

  @Test
  void cgroupV1ReadsTheCpuControllersCountersInNanoseconds() throws IOException {
    Path self =
        write(
            "proc/self/cgroup",
            "11:cpu,cpuacct:/kubepods/burstable/pod1/abc\n9:memory:/kubepods/burstable/pod1/abc\n");
    write("sys/cpu,cpuacct/cpu.stat", "nr_periods 40\nnr_throttled 4\nthrottled_time 2000000000\n");
    write("sys/cpu,cpuacct/cpu.cfs_quota_us", "200000\n");
    write("sys/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    CpuCgroup c = CpuCgroup.find(self, tmp.resolve("sys")).orElseThrow();
    assertThat(c.sample()).contains(new CpuCgroup.Sample(40, 4, 2.0));
    assertThat(c.limitCores()).contains(2.0);
    Files.writeString(tmp.resolve("sys/cpu,cpuacct/cpu.cfs_quota_us"), "-1\n");
    assertThat(c.limitCores()).as("no quota").isEmpty();
  }

  @Test
  void noCpuControllerIsNothingToRead() throws IOException {
    Path self = write("proc/self/cgroup", "0::/\n");
    Files.createDirectories(tmp.resolve("sys"));
    assertThat(CpuCgroup.find(self, tmp.resolve("sys"))).isEmpty();
    assertThat(CpuCgroup.millicores(0.25)).isEqualTo("250m");
    assertThat(CpuCgroup.millicores(2)).isEqualTo("2");
  }
}
