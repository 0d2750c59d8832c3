package io.oneshot.provisionerd;

import io.oneshot.config.Units;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * The memory cgroup provisionerd runs in (in a pod: its container's), read for what the kernel's
 * OOM killer did in it: how many processes it killed, and the limit it enforced. A process of the
 * build killed for memory dies of SIGKILL with nothing said on its output, and the script around it
 * may go on; the count is how the build's error can say why.
 *
 * <p>cgroup v2: {@code memory.events} ({@code oom_kill N}) and {@code memory.max}; v1: {@code
 * memory.oom_control} ({@code oom_kill N}, since Linux 4.13) and {@code memory.limit_in_bytes}. The
 * cgroup is the one {@code /proc/self/cgroup} names, under the mount; inside a container, where the
 * mount is the container's own cgroup, the mount itself.
 */
record MemoryCgroup(Path counters, Path limit) {

  /** A v1 limit at or above this is no limit (the kernel's "unlimited" is a page short of 2^63). */
  private static final long UNLIMITED = 1L << 60;

  static Optional<MemoryCgroup> find() {
    return find(Path.of("/proc/self/cgroup"), Path.of("/sys/fs/cgroup"));
  }

  static Optional<MemoryCgroup> find(Path selfCgroup, Path root) {
    return Cgroups.find(
            selfCgroup, root, "memory", List.of("memory"), "memory.oom_control", "memory.events")
        .map(
            d ->
                d.v2()
                    ? new MemoryCgroup(
                        d.path().resolve("memory.events"), d.path().resolve("memory.max"))
                    : new MemoryCgroup(
                        d.path().resolve("memory.oom_control"),
                        d.path().resolve("memory.limit_in_bytes")));
  }

  /** How many processes the OOM killer has killed in this cgroup so far; -1 when unknown. */
  long oomKills() {
    try {
      for (String line : Files.readAllLines(counters)) {
        if (line.startsWith("oom_kill ")) {
          return Long.parseLong(line.substring("oom_kill ".length()).strip());
        }
      }
    } catch (IOException | NumberFormatException e) {
      // unknown
    }
    return -1;
  }

  /** The memory limit, or empty when there is none (or it cannot be read). */
  Optional<Long> limitBytes() {
    try {
      String v = Files.readString(limit).strip();
      if (v.equals("max")) {
        return Optional.empty();
      }
      long bytes = Long.parseLong(v);
      return bytes >= UNLIMITED ? Optional.empty() : Optional.of(bytes);
    } catch (IOException | NumberFormatException e) {
      return Optional.empty();
    }
  }

  /**
   * What to add to a build's error when the OOM killer killed {@code killed} of its processes:
   * which limit it hit, what the build asked for ({@code asked}: its input.pod's memory limit, null
   * when it asked none and its route's template set it), and how to run it again with more: "the
   * kernel's OOM killer killed 1 process of the build: it hit its memory limit of 300 MiB (its
   * route's template's); rerun it with more: oneshot builds rerun 42 --memory 600Mi".
   */
  String note(long killed, long buildId, String asked) {
    String what =
        "the kernel's OOM killer killed "
            + killed
            + (killed == 1 ? " process" : " processes")
            + " of the build: ";
    java.util.Optional<Long> limit = limitBytes();
    if (limit.isEmpty()) {
      return what + "no memory limit is set, and the node ran out";
    }
    long mib = roundedToMiB(limit.get()) >> 20;
    return what
        + "it hit its memory limit of "
        + Units.formatSize(mib << 20)
        + (asked == null ? " (its route's template's)" : " (it asked for " + asked + ")")
        + "; rerun it with more: oneshot builds rerun "
        + buildId
        + " --memory "
        + (mib * 2)
        + "Mi";
  }

  /** A limit as Kubernetes sets it is whole MiB; the kernel may round it down to a page. */
  private static long roundedToMiB(long bytes) {
    long mib = 1L << 20;
    return bytes % mib == 0 ? bytes : (bytes + mib / 2) / mib * mib;
  }
}
