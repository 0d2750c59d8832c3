package io.oneshot.provisionerd;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Finding the memory cgroup provisionerd runs in and reading what the OOM killer did there, laid
 * out as the kernel does (Documentation/admin-guide/cgroup-v2.rst: memory.events, memory.max;
 * cgroup-v1/memory.rst: memory.oom_control, memory.limit_in_bytes) and as a container sees it (its
 * own cgroup mounted at the root of the hierarchy, /proc/self/cgroup still naming the host's path).
 */
class MemoryCgroupTest {
  @TempDir Path tmp;

  private Path write(String path, String text) throws IOException {
    Path p = tmp.resolve(path);
    Files.createDirectories(p.getParent());
    return Files.writeString(p, text);
  }

  @Test
  void cgroupV2InAContainerCountsKillsAndReadsTheLimit() throws IOException {
    Path self = write("proc/self/cgroup", "0::/\n");
    write("sys/memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n");
    write("sys/memory.max", "314572800\n");
    MemoryCgroup m = MemoryCgroup.find(self, tmp.resolve("sys")).orElseThrow();
    assertThat(m.oomKills()).isEqualTo(2);
    assertThat(m.limitBytes()).contains(314572800L);
    assertThat(m.note(1, 42, null))
        .isEqualTo(
            "the kernel's OOM killer killed 1 process of the build: it hit its memory limit of 300"
                + " MiB (its route's template's); rerun it with more: oneshot builds rerun 42"
                + " --memory 600Mi");
    assertThat(m.note(1, 42, "limits.memory 300Mi"))
        .contains("it hit its memory limit of 300 MiB (it asked for limits.memory 300Mi)");
  }

  @Test
  void cgroupV1InAContainerFallsBackToTheMountItself() throws IOException {
    // The host's path, which the container's mount does not hold.
    Path self =
        write(
            "proc/self/cgroup",
            "12:pids:/kubepods/burstable/pod1/abc\n"
                + "9:memory:/kubepods/burstable/pod1/abc\n"
                + "1:name=systemd:/kubepods/burstable/pod1/abc\n"
                + "0::/\n");
    write("sys/memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
    // What the kernel makes of a 300Mi limit: whole pages.
    write("sys/memory/memory.limit_in_bytes", "314572800\n");
    MemoryCgroup m = MemoryCgroup.find(self, tmp.resolve("sys")).orElseThrow();
    assertThat(m.oomKills()).isEqualTo(3);
    assertThat(m.note(2, 7, null)).contains("killed 2 processes").contains("300 MiB");
  }

  @Test
  void cgroupV1OnAHostReadsItsOwnCgroupAndNoLimitIsSaid() throws IOException {
    Path self = write("proc/self/cgroup", "4:memory:/user.slice/user-0.slice\n");
    write("sys/memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 9\n");
    write(
        "sys/memory/user.slice/user-0.slice/memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
    write("sys/memory/user.slice/user-0.slice/memory.limit_in_bytes", "9223372036854771712\n");
    MemoryCgroup m = MemoryCgroup.find(self, tmp.resolve("sys")).orElseThrow();
    assertThat(m.oomKills()).as("its own cgroup's, not the root's").isEqualTo(1);
    assertThat(m.limitBytes()).isEmpty();
    assertThat(m.note(1, 7, null)).contains("no memory limit is set");
  }

  @Test
  void noMemoryControllerIsNothingToRead() throws IOException {
    Path self = write("proc/self/cgroup", "0::/\n");
    Files.createDirectories(tmp.resolve("sys"));
    assertThat(MemoryCgroup.find(self, tmp.resolve("sys"))).isEmpty();
  }
}
