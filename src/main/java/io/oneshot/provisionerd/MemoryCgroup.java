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
    List<String> lines;
    try {
      lines = Files.readAllLines(selfCgroup);
    } catch (IOException e) {
      return Optional.empty();
    }
    for (String line : lines) {
      String[] f = line.split(":", 3);
      if (f.length < 3) {
        continue;
      }
      if (List.of(f[1].split(",")).contains("memory")) {
        Optional<MemoryCgroup> v1 =
            at(root.resolve("memory"), f[2], "memory.oom_control", "memory.limit_in_bytes");
        if (v1.isPresent()) {
          return v1;
        }
      }
    }
    for (String line : lines) {
      if (line.startsWith("0::")) {
        return at(root, line.substring(3), "memory.events", "memory.max");
      }
    }
    return Optional.empty();
  }

  private static Optional<MemoryCgroup> at(Path mount, String path, String counters, String limit) {
    Path own = mount.resolve(path.replaceFirst("^/+", ""));
    for (Path dir : List.of(own, mount)) {
      if (Files.isReadable(dir.resolve(counters))) {
        return Optional.of(new MemoryCgroup(dir.resolve(counters), dir.resolve(limit)));
      }
    }
    return Optional.empty();
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
   * What to add to a build's error when the OOM killer killed {@code killed} of its processes: "the
   * kernel's OOM killer killed 1 process of the build (the memory limit is 300 MiB): ...".
   */
  String note(long killed) {
    return "the kernel's OOM killer killed "
        + killed
        + (killed == 1 ? " process" : " processes")
        + " of the build ("
        + limitBytes()
            .map(b -> "the container's memory limit is " + Units.formatSize(roundedToMiB(b)))
            .orElse("no memory limit is set: the node ran out")
        + "): it needs a higher memory limit";
  }

  /** A limit as Kubernetes sets it is whole MiB; the kernel may round it down to a page. */
  private static long roundedToMiB(long bytes) {
    long mib = 1L << 20;
    return bytes % mib == 0 ? bytes : (bytes + mib / 2) / mib * mib;
  }
}
