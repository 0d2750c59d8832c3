package io.oneshot.cli;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * One {@code oneshot dev} per data directory: an exclusive lock on {@code <data-dir>/dev.lock},
 * held for the life of the process and released by the operating system however it ends, so a dev
 * that was killed never blocks the next. A second dev on the same directory stops before it touches
 * anything (it would otherwise take the first one's PostgreSQL for a leftover and stop it).
 */
final class DevLock implements AutoCloseable {
  private final FileChannel channel;

  private DevLock(FileChannel channel) {
    this.channel = channel;
  }

  /** Takes the lock and writes this process's pid into the file; refuses when another holds it. */
  static DevLock acquire(Path dir) throws IOException {
    Path file = dir.resolve("dev.lock");
    FileChannel ch =
        FileChannel.open(
            file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
    FileLock lock;
    try {
      lock = ch.tryLock();
    } catch (OverlappingFileLockException e) {
      lock = null;
    }
    if (lock == null) {
      String holder = Files.readString(file, StandardCharsets.UTF_8).strip();
      ch.close();
      throw new CliException(
          Main.USAGE,
          "oneshot dev is already running on "
              + dir
              + (holder.isEmpty() ? "" : " (pid " + holder + ")")
              + "; stop it first, or pass --data-dir and --port to run another one beside it");
    }
    ch.truncate(0);
    ch.write(
        ByteBuffer.wrap((ProcessHandle.current().pid() + "\n").getBytes(StandardCharsets.UTF_8)),
        0);
    ch.force(false);
    return new DevLock(ch);
  }

  @Override
  public void close() throws IOException {
    channel.close();
  }
}
