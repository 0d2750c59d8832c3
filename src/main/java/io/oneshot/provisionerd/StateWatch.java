package io.oneshot.provisionerd;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Watches a state file (terraform's state, a Pulumi stack's checkpoint) while the provisioner's
 * tool runs and uploads it whenever it changes, once a second at most, when {@code whole} says the
 * text read is a whole state (not one being written).
 */
final class StateWatch {
  private final RunContext ctx;
  private final Path file;
  private final String initial;
  private final java.util.function.Predicate<String> whole;
  private ScheduledExecutorService timer;
  private FileTime lastSeen;
  private long lastSize = -1;
  private String lastUploaded;
  private boolean uploadedAny;

  StateWatch(
      RunContext ctx, Path file, String initial, java.util.function.Predicate<String> whole) {
    this.whole = whole;
    this.ctx = ctx;
    this.file = file;
    this.initial = initial;
    this.lastUploaded = initial;
  }

  void start() {
    if (ctx.build().workspace() == null) {
      return;
    }
    timer =
        Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().name("provisionerd-state").daemon().factory());
    long every = Math.max(250, Math.min(1000, ctx.build().heartbeatMs()));
    timer.scheduleWithFixedDelay(this::check, every, every, TimeUnit.MILLISECONDS);
  }

  private synchronized void check() {
    try {
      FileTime t = Files.getLastModifiedTime(file);
      long size = Files.size(file);
      if (t.equals(lastSeen) && size == lastSize) {
        return;
      }
      lastSeen = t;
      lastSize = size;
      String now = Files.readString(file, StandardCharsets.UTF_8);
      if (now.isBlank() || now.equals(lastUploaded) || !whole.test(now)) {
        return;
      }
      ctx.saveState(now);
      lastUploaded = now;
      uploadedAny = true;
    } catch (NoSuchFileException e) {
      // no state yet
    } catch (IOException | RuntimeException e) {
      // terraform is between writing and renaming it; the next check sees it
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  void stop() {
    if (timer != null) {
      timer.shutdownNow();
      try {
        timer.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  synchronized boolean uploadedAny() {
    return uploadedAny;
  }

  /** The state file as terraform left it, or the initial state when it wrote none. */
  String current() {
    try {
      String s = Files.readString(file, StandardCharsets.UTF_8);
      return s.isBlank() ? initial : s;
    } catch (IOException e) {
      return initial;
    }
  }
}
