package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * provisionerd's side of the runner protocol. Each call retries what may pass (connection errors,
 * timeouts, 429, 5xx) with jittered exponential backoff for up to {@code retryBudget}, so that a
 * running build survives a dispatcher restart; answers that will not change (401, 409, 410, other
 * 4xx) come back at once as {@link Refused}.
 */
final class RunnerClient {
  private static final Logger log = LoggerFactory.getLogger(RunnerClient.class);

  /** The API refused the call; retrying would not help. */
  static final class Refused extends Exception {
    final int status;

    Refused(int status, String message) {
      super(message);
      this.status = status;
    }
  }

  /** The API could not be reached (or kept failing) for the whole retry budget. */
  static final class Unreachable extends Exception {
    Unreachable(String message) {
      super(message);
    }
  }

  private final HttpClient http;
  private final URI base;
  private final String token;
  private final Duration retryBudget;

  RunnerClient(URI base, String token, Duration retryBudget) {
    this.http =
        HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(5))
            .version(HttpClient.Version.HTTP_1_1)
            .build();
    this.base = base;
    this.token = token;
    this.retryBudget = retryBudget;
  }

  JsonNode acquire() throws Refused, Unreachable, InterruptedException {
    return post("acquire", "{}");
  }

  JsonNode heartbeat() throws Refused, Unreachable, InterruptedException {
    return post("heartbeat", "{}");
  }

  JsonNode logs(String body) throws Refused, Unreachable, InterruptedException {
    return post("logs", body);
  }

  JsonNode complete(String body) throws Refused, Unreachable, InterruptedException {
    return post("complete", body);
  }

  private JsonNode post(String call, String body)
      throws Refused, Unreachable, InterruptedException {
    long deadline = System.nanoTime() + retryBudget.toNanos();
    long backoffMs = 100;
    int attempt = 0;
    while (true) {
      attempt++;
      String problem;
      long waitMs = backoffMs;
      try {
        HttpRequest req =
            HttpRequest.newBuilder(base.resolve("/api/v1/runner/" + call))
                .timeout(Duration.ofSeconds(30))
                .header("Authorization", "Bearer " + token)
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build();
        HttpResponse<String> resp = http.send(req, HttpResponse.BodyHandlers.ofString());
        int status = resp.statusCode();
        if (status >= 200 && status < 300) {
          if (attempt > 1) {
            log.info("{} succeeded after {} tries.", call, attempt);
          }
          return Json.tree(resp.body());
        }
        String message = errorOf(resp.body(), status);
        if (status == 429 || status >= 500) {
          problem = "HTTP " + status + ": " + message;
          waitMs = Math.max(backoffMs, retryAfterMs(resp));
        } else {
          throw new Refused(status, message);
        }
      } catch (IOException e) {
        problem =
            e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
      }
      long left = (deadline - System.nanoTime()) / 1_000_000;
      if (left <= 0) {
        throw new Unreachable(
            call
                + " failed for "
                + retryBudget.toSeconds()
                + " s ("
                + attempt
                + " tries): "
                + problem);
      }
      long sleep = Math.min(left, waitMs + ThreadLocalRandom.current().nextLong(waitMs / 2 + 1));
      if (attempt == 1 || attempt % 10 == 0) {
        log.warn("{} failed ({}); retrying for up to {} s more.", call, problem, left / 1000);
      }
      Thread.sleep(sleep);
      backoffMs = Math.min(5_000, backoffMs * 2);
    }
  }

  private static long retryAfterMs(HttpResponse<String> resp) {
    return resp.headers()
        .firstValue("Retry-After")
        .map(
            v -> {
              try {
                return Long.parseLong(v.strip()) * 1000;
              } catch (NumberFormatException e) {
                return 0L;
              }
            })
        .orElse(0L);
  }

  private static String errorOf(String body, int status) {
    try {
      JsonNode n = Json.tree(body);
      if (n != null && n.hasNonNull("error")) {
        return n.get("error").asText();
      }
    } catch (RuntimeException e) {
      // not JSON
    }
    return "HTTP " + status;
  }
}
