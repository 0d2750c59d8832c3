package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.api.RunnerHeaders;
import io.oneshot.build.Runner;
import io.oneshot.config.Backoff;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
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

    /** The attempt is bound to another runner: this one must not run anything. */
    final boolean heldByOther;

    Refused(int status, String message, boolean heldByOther) {
      super(message);
      this.status = status;
      this.heldByOther = heldByOther;
    }
  }

  /** The API could not be reached (or kept failing) for the whole retry budget. */
  static final class Unreachable extends Exception {
    Unreachable(String message) {
      super(message);
    }
  }

  private final URI base;
  private final String token;
  private final Duration retryBudget;
  private final Map<String, String> runnerHeaders;

  /** How long each call is retried before it gives up. */
  Duration retryBudget() {
    return retryBudget;
  }

  /**
   * When the last call that renewed the lease (acquire, heartbeat, a log batch) was sent, by {@link
   * System#nanoTime}: the dispatcher recorded the heartbeat after that, so a lease counted from the
   * send ends no later than the dispatcher's count of it.
   */
  private final AtomicLong renewedAt = new AtomicLong(System.nanoTime());

  /**
   * Where the runner's proof is (in a pod: the projected ServiceAccount token the kubelet keeps
   * fresh), read again for every call; null: none (a local attempt, proven by its connection).
   */
  private final java.nio.file.Path proofFile;

  /** The session the API gave this runner once it proved who it is; null before. */
  private volatile String session;

  RunnerClient(URI base, String token, Duration retryBudget, Runner runner) {
    this(base, token, retryBudget, runner, null);
  }

  RunnerClient(
      URI base, String token, Duration retryBudget, Runner runner, java.nio.file.Path proofFile) {
    this.base = base;
    this.token = token;
    this.retryBudget = retryBudget;
    this.runnerHeaders = RunnerHeaders.of(runner);
    this.proofFile = proofFile;
  }

  /** The proof's current value, or null when there is none or it cannot be read. */
  private String proof() {
    if (proofFile == null) {
      return null;
    }
    try {
      String p = java.nio.file.Files.readString(proofFile, StandardCharsets.UTF_8).strip();
      return p.isEmpty() ? null : p;
    } catch (IOException e) {
      log.warn("Cannot read the runner's proof {}: {}.", proofFile, e.toString());
      return null;
    }
  }

  JsonNode acquire() throws Refused, Unreachable, InterruptedException {
    return post("acquire", "{}", retryBudget, READ_TIMEOUT, true);
  }

  /**
   * One try, with a read timeout of {@code timeout}: heartbeats come again anyway, and one that
   * hangs must not hold up the next.
   */
  JsonNode heartbeat(Duration timeout) throws Refused, Unreachable, InterruptedException {
    return post("heartbeat", "{}", Duration.ZERO, timeout, true);
  }

  /** Idempotent: the batch carries its first line's number, and the API skips what it has. */
  JsonNode logs(String body) throws Refused, Unreachable, InterruptedException {
    return post("logs", body, retryBudget, READ_TIMEOUT, true);
  }

  /** How long ago the last call that renewed the lease was sent. */
  Duration sinceRenewed() {
    return Duration.ofNanos(System.nanoTime() - renewedAt.get());
  }

  /** Idempotent: each upload replaces this attempt's version of the workspace's state. */
  JsonNode state(String body) throws Refused, Unreachable, InterruptedException {
    return post("state", body, retryBudget, READ_TIMEOUT, false);
  }

  /** Idempotent: a build is marked as holding its job once. */
  JsonNode tookJob(String body) throws Refused, Unreachable, InterruptedException {
    return post("took-job", body, retryBudget, READ_TIMEOUT, true);
  }

  JsonNode complete(String body) throws Refused, Unreachable, InterruptedException {
    return post("complete", body, retryBudget, READ_TIMEOUT, false);
  }

  private static final Duration READ_TIMEOUT = Duration.ofSeconds(30);

  /** One answer from the API. */
  private record Reply(int status, String body, long retryAfterMs) {}

  /**
   * One POST over {@link HttpURLConnection}, which keeps connections alive between calls and starts
   * in a fraction of the time {@code java.net.http.HttpClient} takes; that matters in a process
   * that lives for one build.
   */
  private Reply send(String call, String body, Duration readTimeout) throws IOException {
    HttpURLConnection c =
        (HttpURLConnection) base.resolve("/api/v1/runner/" + call).toURL().openConnection();
    try {
      c.setConnectTimeout(5_000);
      c.setReadTimeout((int) readTimeout.toMillis());
      c.setRequestMethod("POST");
      c.setDoOutput(true);
      c.setRequestProperty("Authorization", "Bearer " + token);
      runnerHeaders.forEach(c::setRequestProperty);
      String proof = proof();
      if (proof != null) {
        c.setRequestProperty(RunnerHeaders.PROOF, proof);
      }
      String s = session;
      if (s != null) {
        c.setRequestProperty(RunnerHeaders.SESSION, s);
      }
      c.setRequestProperty("Content-Type", "application/json");
      byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
      c.setFixedLengthStreamingMode(bytes.length);
      try (OutputStream out = c.getOutputStream()) {
        out.write(bytes);
      }
      int status = c.getResponseCode();
      InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream();
      String text = "";
      if (in != null) {
        try (in) {
          text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
      }
      String given = c.getHeaderField(RunnerHeaders.SESSION);
      if (given != null && !given.isBlank()) {
        session = given;
      }
      return new Reply(status, text, retryAfterMs(c.getHeaderField("Retry-After")));
    } catch (IOException e) {
      c.disconnect();
      throw e;
    }
  }

  /**
   * @param renews whether an accepted call renews the lease (the dispatcher records a heartbeat)
   */
  private JsonNode post(
      String call, String body, Duration budget, Duration readTimeout, boolean renews)
      throws Refused, Unreachable, InterruptedException {
    long deadline = System.nanoTime() + budget.toNanos();
    Backoff.Sequence backoff = Backoff.RUNNER.sequence();
    int attempt = 0;
    while (true) {
      attempt++;
      String problem;
      long retryAfterMs = 0;
      long sentAt = System.nanoTime();
      try {
        Reply r = send(call, body, readTimeout);
        if (r.status() >= 200 && r.status() < 300) {
          if (renews) {
            renewedAt.accumulateAndGet(sentAt, (a, b) -> b - a > 0 ? b : a);
          }
          if (attempt > 1) {
            log.info("{} succeeded after {} tries.", call, attempt);
          }
          return Json.tree(r.body());
        }
        String message = errorOf(r.body(), r.status());
        if (r.status() == 429 || r.status() >= 500) {
          problem = "HTTP " + r.status() + ": " + message;
          retryAfterMs = r.retryAfterMs();
        } else {
          throw new Refused(r.status(), message, r.status() == 409 && heldByOther(r.body()));
        }
      } catch (IOException e) {
        problem =
            e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
      }
      long left = (deadline - System.nanoTime()) / 1_000_000;
      if (left <= 0) {
        throw new Unreachable(
            call + " failed for " + budget.toSeconds() + " s (" + attempt + " tries): " + problem);
      }
      // The server's Retry-After, when it gave one, is the least wait.
      long sleep = Math.min(left, Math.max(backoff.next().toMillis(), retryAfterMs));
      if (attempt == 1 || attempt % 10 == 0) {
        log.warn("{} failed ({}); retrying for up to {} s more.", call, problem, left / 1000);
      }
      Thread.sleep(sleep);
    }
  }

  private static boolean heldByOther(String body) {
    try {
      JsonNode n = Json.tree(body);
      return n != null && n.hasNonNull("holder");
    } catch (RuntimeException e) {
      return false;
    }
  }

  private static long retryAfterMs(String header) {
    if (header == null) {
      return 0;
    }
    try {
      return Long.parseLong(header.strip()) * 1000;
    } catch (NumberFormatException e) {
      return 0;
    }
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
