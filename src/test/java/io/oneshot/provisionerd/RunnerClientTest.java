package io.oneshot.provisionerd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import io.oneshot.build.Runner;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What provisionerd's client retries (no answer, 429, 5xx) and what it takes as a refusal (any
 * other 4xx), against an API that answers as scripted.
 */
class RunnerClientTest {
  private record Answer(int status, String body, String retryAfter) {}

  private HttpServer server;
  private final Deque<Answer> answers = new ArrayDeque<>();
  private final List<String> requests = new ArrayList<>();

  @BeforeEach
  void start() throws IOException {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/",
        exchange -> {
          String auth = exchange.getRequestHeaders().getFirst("Authorization");
          synchronized (answers) {
            requests.add(exchange.getRequestURI().getPath() + " " + auth);
          }
          Answer a;
          synchronized (answers) {
            a = answers.size() > 1 ? answers.poll() : answers.peek();
          }
          byte[] body = a.body().getBytes(StandardCharsets.UTF_8);
          exchange.getResponseHeaders().add("Content-Type", "application/json");
          if (a.retryAfter() != null) {
            exchange.getResponseHeaders().add("Retry-After", a.retryAfter());
          }
          exchange.sendResponseHeaders(a.status(), body.length);
          try (OutputStream out = exchange.getResponseBody()) {
            out.write(body);
          }
        });
    server.start();
  }

  @AfterEach
  void stop() {
    server.stop(0);
  }

  private void answer(int status, String body) {
    answers.add(new Answer(status, body, null));
  }

  private RunnerClient client(Duration budget) {
    return new RunnerClient(
        URI.create("http://127.0.0.1:" + server.getAddress().getPort()),
        "osb_token",
        budget,
        new Runner("runner-1", "pod-1", "uid-1", "host", 1L));
  }

  private int requests() {
    synchronized (answers) {
      return requests.size();
    }
  }

  @Test
  void serverErrorsAndThrottlingAreRetriedUntilAnAnswer() throws Exception {
    answer(503, "{\"error\": \"this replica is shutting down\"}");
    answers.add(new Answer(429, "{\"error\": \"slow down\"}", "0"));
    answer(500, "not json");
    answer(200, "{\"buildId\": 7}");
    assertThat(client(Duration.ofSeconds(30)).acquire().path("buildId").asLong()).isEqualTo(7);
    assertThat(requests()).isEqualTo(4);
    assertThat(requests).allMatch(r -> r.equals("/api/v1/runner/acquire Bearer osb_token"));
  }

  @Test
  void aRefusalIsNotRetriedAndSaysWhetherAnotherRunnerHoldsTheAttempt() {
    answer(409, "{\"error\": \"attempt 1 of build 7 is held by runner x\", \"holder\": {}}");
    assertThatThrownBy(() -> client(Duration.ofSeconds(30)).acquire())
        .isInstanceOfSatisfying(
            RunnerClient.Refused.class,
            r -> {
              assertThat(r.status).isEqualTo(409);
              assertThat(r.heldByOther).isTrue();
              assertThat(r.getMessage()).isEqualTo("attempt 1 of build 7 is held by runner x");
            });
    assertThat(requests()).isEqualTo(1);
  }

  @Test
  void aConflictWithoutAHolderIsARefusalButNotAnotherRunner() {
    answer(409, "{\"error\": \"build 7 is pending\"}");
    assertThatThrownBy(() -> client(Duration.ofSeconds(30)).heartbeat(Duration.ofSeconds(5)))
        .isInstanceOfSatisfying(
            RunnerClient.Refused.class,
            r -> {
              assertThat(r.heldByOther).isFalse();
              assertThat(r.getMessage()).isEqualTo("build 7 is pending");
            });
  }

  @Test
  void aRefusalWithoutAJsonBodyIsNamedByItsStatus() {
    answer(401, "unauthorized");
    assertThatThrownBy(() -> client(Duration.ofSeconds(30)).complete("{}"))
        .isInstanceOfSatisfying(
            RunnerClient.Refused.class,
            r -> {
              assertThat(r.status).isEqualTo(401);
              assertThat(r.heldByOther).isFalse();
              assertThat(r.getMessage()).isEqualTo("HTTP 401");
            });
    assertThat(requests()).isEqualTo(1);
  }

  @Test
  void anApiThatKeepsFailingIsGivenUpOnceTheBudgetIsSpent() {
    answer(503, "{\"error\": \"down\"}");
    assertThatThrownBy(() -> client(Duration.ofMillis(700)).logs("{}"))
        .isInstanceOf(RunnerClient.Unreachable.class)
        .hasMessageContaining("logs failed for 0 s")
        .hasMessageContaining("HTTP 503: down");
    assertThat(requests()).as("tried more than once within the budget").isGreaterThan(1);
  }

  @Test
  void aHeartbeatIsTriedOnceAndAnAcceptedCallRenewsTheLease() throws Exception {
    answer(503, "{\"error\": \"down\"}");
    RunnerClient c = client(Duration.ofSeconds(30));
    assertThatThrownBy(() -> c.heartbeat(Duration.ofSeconds(5)))
        .isInstanceOf(RunnerClient.Unreachable.class);
    assertThat(requests()).isEqualTo(1);

    answers.clear();
    answer(200, "{\"cancelRequested\": false}");
    // The lease is renewed from when an accepted call was sent: no earlier than the call began.
    long beforeHeartbeat = System.nanoTime();
    c.heartbeat(Duration.ofSeconds(5));
    Duration sinceRenewed = c.sinceRenewed();
    assertThat(sinceRenewed)
        .isLessThanOrEqualTo(Duration.ofNanos(System.nanoTime() - beforeHeartbeat));

    answer(200, "{\"version\": 1}");
    long beforeState = System.nanoTime();
    c.state("{}");
    long now = System.nanoTime();
    assertThat(c.sinceRenewed())
        .as("a state upload renews nothing: the lease still dates from the heartbeat")
        .isGreaterThan(Duration.ofNanos(now - beforeState));
  }
}
