package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** Waiting for a build to end: a live progress line, or the log as it comes. */
final class Waiting {
  private static final long POLL_MS = 250;

  private Waiting() {}

  /**
   * Polls the build until it ends, showing {@code pending → launching → running → outcome} with the
   * elapsed time: in place on a terminal, one line per change otherwise.
   */
  static JsonNode await(ApiClient api, long id, PrintWriter err) {
    boolean tty = System.console() != null;
    long start = System.nanoTime();
    String shown = null;
    while (true) {
      JsonNode b = api.get("/api/v1/builds/" + id);
      String status = b.path("status").asText();
      String elapsed = Text.duration(Duration.ofNanos(System.nanoTime() - start));
      String line = "build " + id + "  " + label(status) + "  " + elapsed;
      if (status.equals("pending") || status.equals("launching")) {
        line += "  (" + Text.orDash(b.path("reason")) + ")";
      }
      boolean done = terminal(status);
      if (tty) {
        err.print("\r\033[K" + line);
        if (done) {
          err.println();
        }
        err.flush();
      } else if (!status.equals(shown)) {
        err.println(line);
      }
      shown = status;
      if (done) {
        return b;
      }
      try {
        Thread.sleep(POLL_MS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new CliException(Main.UNREACHABLE, "interrupted");
      }
    }
  }

  /** Streams the log until the build ends, then returns the build. */
  static JsonNode follow(ApiClient api, long id, PrintWriter out, boolean json) {
    return follow(api, id, 0, out, json);
  }

  /** {@link #follow(ApiClient, long, PrintWriter, boolean)} from the line after {@code from}. */
  static JsonNode follow(ApiClient api, long id, long from, PrintWriter out, boolean json) {
    long[] after = {from};
    while (true) {
      api.stream(
          "/api/v1/builds/" + id + "/logs?follow=true&after=" + after[0],
          l -> {
            JsonNode line = Json.tree(l);
            after[0] = line.path("seq").asLong(after[0]);
            out.println(json ? l : Text.logLine(line));
            out.flush();
          });
      JsonNode b = api.get("/api/v1/builds/" + id);
      if (terminal(b.path("status").asText())) {
        return b;
      }
      // The server ended the stream early (it restarted): pick up after the last line.
    }
  }

  /** A status as the CLI shows it: the API's own word ("pending"), so one word means one state. */
  static String label(String status) {
    return status;
  }

  static boolean terminal(String status) {
    return status.equals("succeeded") || status.equals("failed") || status.equals("canceled");
  }

  /**
   * What a command that queued a build prints: {@code line} (or the API's answer with {@code -o
   * json}) and exit 0; with {@code wait} or {@code follow}, the line on stderr, then progress or
   * the log until the build ends, and the build's own exit code.
   */
  static int queued(
      ApiClient api,
      JsonNode created,
      String line,
      boolean wait,
      boolean follow,
      boolean json,
      PrintWriter out,
      PrintWriter err) {
    if (!wait && !follow) {
      out.println(json ? Json.write(created) : line);
      return Main.OK;
    }
    err.println(line);
    long id = created.path("id").asLong();
    JsonNode last = follow ? follow(api, id, out, json) : await(api, id, err);
    if (json && !follow) {
      out.println(Json.write(last));
    }
    summary(last, err);
    return exitCode(last);
  }

  static void summary(JsonNode b, PrintWriter err) {
    String status = b.path("status").asText();
    String took = Text.between(b.path("createdAt"), b.path("finishedAt"));
    StringBuilder line = new StringBuilder("build " + b.path("id").asText() + " " + status);
    line.append(status.equals("succeeded") ? " in " : " after ").append(took);
    // The whole life, then its parts, named as `builds list` and `builds show` name them.
    List<String> parts = new ArrayList<>();
    if (b.hasNonNull("startedAt")) {
      parts.add("waited " + Text.between(b.path("createdAt"), b.path("startedAt")));
      parts.add("ran " + Text.between(b.path("startedAt"), b.path("finishedAt")));
    }
    if (b.hasNonNull("exitCode")) {
      parts.add("exit code " + b.path("exitCode").asInt());
    }
    if (!parts.isEmpty()) {
      line.append(" (").append(String.join(", ", parts)).append(')');
    }
    if (!status.equals("succeeded") && b.hasNonNull("error")) {
      line.append(": ").append(b.path("error").asText());
    }
    err.println(line);
  }

  static int exitCode(JsonNode b) {
    return switch (b.path("status").asText()) {
      case "succeeded" -> Main.OK;
      case "canceled" -> Main.CANCELED;
      default -> Main.BUILD_FAILED;
    };
  }
}
