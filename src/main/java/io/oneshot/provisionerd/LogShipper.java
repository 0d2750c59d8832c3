package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import io.oneshot.build.LogLine;
import java.io.PrintStream;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sends log lines to the API in batches: when 100 lines are waiting, or 250 ms after the first of a
 * batch. Every line is also written to stdout at once, so that {@code kubectl logs} shows the
 * build. The queue is bounded: a build that writes faster than the API takes is slowed down rather
 * than let provisionerd run out of memory. Each answer says whether cancel was requested.
 */
final class LogShipper implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(LogShipper.class);
  static final int BATCH_LINES = 100;
  static final long BATCH_MS = 250;

  private record Line(
      Instant ts, String stream, String level, String stage, String text, boolean milestone) {}

  private static final Line END = new Line(null, null, null, null, null, false);

  private final RunnerClient client;
  private final PrintStream echo;
  private final Masker masker;
  private final Consumer<JsonNode> onReply;
  private final Consumer<RunnerClient.Refused> onRefused;
  private final BlockingQueue<Line> queue = new ArrayBlockingQueue<>(10_000);
  private final Thread thread;
  private volatile boolean closed;

  /** The number of the next batch's first line; the API skips lines it already has. */
  private long next = 1;

  LogShipper(
      RunnerClient client,
      PrintStream echo,
      Consumer<JsonNode> onReply,
      Consumer<RunnerClient.Refused> onRefused) {
    this(client, echo, onReply, onRefused, new Masker(java.util.List.of()));
  }

  LogShipper(
      RunnerClient client,
      PrintStream echo,
      Consumer<JsonNode> onReply,
      Consumer<RunnerClient.Refused> onRefused,
      Masker masker) {
    this.masker = masker;
    this.client = client;
    this.echo = echo;
    this.onReply = onReply;
    this.onRefused = onRefused;
    this.thread = Thread.ofPlatform().name("provisionerd-logs").daemon().start(this::loop);
  }

  void add(String stream, String level, String stage, String text) {
    add(stream, level, stage, text, false);
  }

  /** What masks the sensitive values in every line (and the build's error). */
  Masker masker() {
    return masker;
  }

  /** A line that also marks a step in the build's timeline. */
  void milestone(String stage, String text) {
    add(LogLine.SYSTEM, "info", stage, text, true);
  }

  private void add(String stream, String level, String stage, String raw, boolean milestone) {
    if (closed) {
      return;
    }
    String text = masker.mask(raw);
    synchronized (echo) {
      echo.println(LogLine.SYSTEM.equals(stream) ? "[oneshot] " + text : text);
    }
    try {
      queue.put(new Line(Instant.now(), stream, level, stage, text, milestone));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void loop() {
    List<Line> batch = new ArrayList<>(BATCH_LINES);
    boolean ending = false;
    while (!ending) {
      try {
        Line first = queue.take();
        if (first == END) {
          break;
        }
        batch.add(first);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(BATCH_MS);
        while (batch.size() < BATCH_LINES) {
          long left = deadline - System.nanoTime();
          Line next = left > 0 ? queue.poll(left, TimeUnit.NANOSECONDS) : queue.poll();
          if (next == null) {
            break;
          }
          if (next == END) {
            ending = true;
            break;
          }
          batch.add(next);
        }
        send(batch);
        batch.clear();
      } catch (InterruptedException e) {
        break;
      }
    }
  }

  private void send(List<Line> batch) throws InterruptedException {
    ObjectNode body = Json.MAPPER.createObjectNode();
    body.put("first", next);
    ArrayNode lines = body.putArray("lines");
    for (Line l : batch) {
      ObjectNode n = lines.addObject();
      n.put("ts", Json.TIME.format(l.ts()));
      n.put("stream", l.stream());
      if (l.level() != null) {
        n.put("level", l.level());
      }
      if (l.stage() != null) {
        n.put("stage", l.stage());
      }
      n.put("text", l.text());
      if (l.milestone()) {
        n.put("milestone", true);
      }
    }
    next += batch.size();
    try {
      onReply.accept(client.logs(Json.write(body)));
    } catch (RunnerClient.Refused e) {
      onRefused.accept(e);
    } catch (RunnerClient.Unreachable e) {
      log.error("Dropped {} log lines: {}.", batch.size(), e.getMessage());
    }
  }

  /**
   * Sends what is queued and stops. Waits for the last batches as long as a call is retried, and
   * half a minute more: the build's outcome goes after them, so its last lines are not left to a
   * batch still retrying while the dispatcher cannot take it (a replica that cannot prove this pod
   * while its cluster's API server is away answers 503 until it is back).
   */
  @Override
  public void close() {
    closed = true;
    try {
      queue.put(END);
      thread.join(client.retryBudget().plusSeconds(30).toMillis());
      if (thread.isAlive()) {
        log.error("Gave up waiting for the last log lines to be sent; the rest are not stored.");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
