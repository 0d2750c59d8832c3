package io.oneshot.provisionerd;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * Where provisionerd's own cgroup of a controller is: the path {@code /proc/self/cgroup} names for
 * it (cgroup v1: the controller's line, under one of its mounts; v2: the {@code 0::} line, under
 * the unified mount), or the mount itself, which inside a container is the container's own cgroup
 * (the host's path the file names is not there). Found by a file the controller keeps.
 */
final class Cgroups {
  private Cgroups() {}

  /** A cgroup directory found, and whether it is v2's. */
  record Dir(Path path, boolean v2) {}

  static Optional<Dir> find(
      Path selfCgroup,
      Path root,
      String v1Controller,
      List<String> v1Mounts,
      String v1File,
      String v2File) {
    List<String> lines;
    try {
      lines = Files.readAllLines(selfCgroup);
    } catch (IOException e) {
      return Optional.empty();
    }
    for (String line : lines) {
      String[] f = line.split(":", 3);
      if (f.length == 3 && List.of(f[1].split(",")).contains(v1Controller)) {
        for (String mount : v1Mounts) {
          Optional<Path> d = under(root.resolve(mount), f[2], v1File);
          if (d.isPresent()) {
            return Optional.of(new Dir(d.get(), false));
          }
        }
      }
    }
    for (String line : lines) {
      if (line.startsWith("0::")) {
        return under(root, line.substring(3), v2File).map(d -> new Dir(d, true));
      }
    }
    return Optional.empty();
  }

  private static Optional<Path> under(Path mount, String path, String file) {
    Path own = mount.resolve(path.replaceFirst("^/+", ""));
    for (Path d : List.of(own, mount)) {
      if (Files.isReadable(d.resolve(file))) {
        return Optional.of(d);
      }
    }
    return Optional.empty();
  }
}
