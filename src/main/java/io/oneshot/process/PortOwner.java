package io.oneshot.process;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Who listens on a TCP port, as Linux's {@code /proc} tells: the listening sockets of the port
 * ({@code /proc/net/tcp} and {@code tcp6}, state LISTEN) against the sockets a process and its
 * descendants hold open ({@code /proc/<pid>/fd}). A port picked free and handed to a child can be
 * taken by another process before the child binds it; what answers there is then not the child.
 */
public final class PortOwner {
  /** Who listens on the port. */
  public enum Owner {
    /** The process or one of its descendants, and nobody else. */
    THIS_TREE,
    /** Some other process (also: others beside the tree). */
    ANOTHER,
    /** Nobody listens on it (yet). */
    NOBODY,
    /** This cannot be told here: no {@code /proc}, or a process's sockets cannot be read. */
    UNKNOWN
  }

  private static final String LISTEN = "0A";
  private static final String ESTABLISHED = "01";

  private final Path proc;

  /** Reads the system's {@code /proc}. */
  public PortOwner() {
    this(Path.of("/proc"));
  }

  /** Reads {@code proc} as {@code /proc} (tests). */
  PortOwner(Path proc) {
    this.proc = proc;
  }

  /** Who listens on TCP {@code port}, seen from {@code root}'s tree. */
  public Owner of(ProcessHandle root, int port) {
    Set<String> listening = new HashSet<>();
    boolean any = false;
    for (String table : List.of("tcp", "tcp6")) {
      Path f = proc.resolve("net").resolve(table);
      if (!Files.isReadable(f)) {
        continue;
      }
      any = true;
      try {
        listening.addAll(listeners(Files.readAllLines(f), port));
      } catch (IOException e) {
        return Owner.UNKNOWN;
      }
    }
    if (!any) {
      return Owner.UNKNOWN;
    }
    if (listening.isEmpty()) {
      return Owner.NOBODY;
    }
    Set<String> held = new HashSet<>();
    try (Stream<ProcessHandle> tree = Stream.concat(Stream.of(root), root.descendants())) {
      for (ProcessHandle p : (Iterable<ProcessHandle>) tree::iterator) {
        if (!sockets(p.pid(), held) && p.isAlive()) {
          return Owner.UNKNOWN;
        }
      }
    }
    return held.containsAll(listening) ? Owner.THIS_TREE : Owner.ANOTHER;
  }

  /**
   * The inode of the client's socket of an established loopback connection from port {@code
   * clientPort} to port {@code serverPort}, as the kernel lists it ({@code /proc/net/tcp} and
   * {@code tcp6}); empty when there is none (closed meanwhile, or not on this machine's network).
   */
  public Optional<String> clientSocket(int clientPort, int serverPort) {
    for (String table : List.of("tcp", "tcp6")) {
      Path f = proc.resolve("net").resolve(table);
      try {
        Optional<String> found = connection(Files.readAllLines(f), clientPort, serverPort);
        if (found.isPresent()) {
          return found;
        }
      } catch (IOException e) {
        // no such table here
      }
    }
    return Optional.empty();
  }

  /** Whether process {@code pid} itself holds the socket {@code inode} open. */
  public boolean holds(long pid, String inode) {
    Set<String> held = new HashSet<>();
    return sockets(pid, held) && held.contains(inode);
  }

  /**
   * The inode of the socket in a {@code /proc/net/tcp} table whose local port is {@code local} and
   * remote port {@code remote}, established.
   */
  static Optional<String> connection(List<String> table, int local, int remote) {
    for (String line : table) {
      String[] f = line.trim().split("\\s+");
      if (f.length < 10 || !f[3].equals(ESTABLISHED)) {
        continue;
      }
      if (port(f[1]) == local && port(f[2]) == remote) {
        return Optional.of(f[9]);
      }
    }
    return Optional.empty();
  }

  private static int port(String address) {
    int colon = address.lastIndexOf(':');
    try {
      return colon < 0 ? -1 : Integer.parseInt(address.substring(colon + 1), 16);
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /**
   * The socket inodes listening on {@code port} in a {@code /proc/net/tcp} table: {@code sl
   * local_address rem_address st ... uid timeout inode}, addresses as {@code HEXADDR:HEXPORT}.
   */
  static Set<String> listeners(List<String> table, int port) {
    Set<String> out = new HashSet<>();
    for (String line : table) {
      String[] f = line.trim().split("\\s+");
      if (f.length < 10 || !f[3].equals(LISTEN)) {
        continue;
      }
      int colon = f[1].lastIndexOf(':');
      if (colon < 0) {
        continue;
      }
      try {
        if (Integer.parseInt(f[1].substring(colon + 1), 16) == port) {
          out.add(f[9]);
        }
      } catch (NumberFormatException e) {
        // the header line, or a line of another shape
      }
    }
    return out;
  }

  /**
   * Adds the socket inodes {@code pid} holds open to {@code into}; false when they cannot be read.
   */
  private boolean sockets(long pid, Set<String> into) {
    try (DirectoryStream<Path> fds =
        Files.newDirectoryStream(proc.resolve(Long.toString(pid)).resolve("fd"))) {
      for (Path fd : fds) {
        String target;
        try {
          target = Files.readSymbolicLink(fd).toString();
        } catch (IOException | UnsupportedOperationException e) {
          continue; // closed meanwhile
        }
        if (target.startsWith("socket:[") && target.endsWith("]")) {
          into.add(target.substring(8, target.length() - 1));
        }
      }
      return true;
    } catch (IOException | SecurityException e) {
      return false;
    }
  }
}
