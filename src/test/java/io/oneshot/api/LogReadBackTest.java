package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A large log read back by a slow reader: every line once, in order, to the end, whether the reader
 * asks for the log or follows it. The reader takes its lines at a limited rate, so the server's
 * write queue fills again and again while it streams.
 */
class LogReadBackTest {
  private static final int LINES = 1_000_000;
  private static TestServer t;
  private static long id;

  @BeforeAll
  static void aBuildWithAMillionLines() {
    t = TestServer.with().routes("routes: [{name: a}]").launcher(new RecordingLauncher()).start();
    id = t.api.submitScript("{}", "true");
    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    Sql.exec(
        "INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)"
            + " SELECT ?, g, clock_timestamp(), 1, 'stdout', NULL, NULL, 'line ' || g"
            + " FROM generate_series(1, ?) g",
        id,
        LINES);
    Sql.exec("UPDATE oneshot.builds SET log_seq = ? WHERE id = ?", (long) LINES, id);
  }

  @AfterAll
  static void stop() {
    if (t != null) {
      t.close();
    }
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"read", "follow"})
  void aSlowReaderGetsEveryLineOnceInOrder(String how) throws Exception {
    String query = how.equals("follow") ? "?follow=true" : "";
    HttpClient client = HttpClient.newHttpClient();
    HttpResponse<java.io.InputStream> r =
        client.send(
            HttpRequest.newBuilder(
                    URI.create(t.api.base() + "/api/v1/builds/" + id + "/logs" + query))
                .header("Authorization", "Bearer " + TestServer.ADMIN_TOKEN)
                .build(),
            HttpResponse.BodyHandlers.ofInputStream());
    assertThat(r.statusCode()).isEqualTo(200);
    long expected = 1;
    long outOfOrder = 0;
    long first = -1;
    try (BufferedReader in =
        new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8), 4096)) {
      String line;
      while ((line = in.readLine()) != null) {
        int at = line.indexOf("\"seq\":");
        long seq = Long.parseLong(line.substring(at + 6, line.indexOf(',', at)));
        if (seq != expected) {
          first = seq;
          outOfOrder++;
          break; // one is enough: a stream that repeats itself may never end
        }
        expected++;
        // About 100,000 lines a second: a reader slower than the server can write.
        if (seq % 1000 == 0) {
          Thread.sleep(10);
        }
      }
    }
    assertThat(outOfOrder).as("lines out of order or repeated (first at seq %d)", first).isZero();
    assertThat(expected - 1).as("lines read").isEqualTo(LINES);
  }
}
