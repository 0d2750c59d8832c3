package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.PromText;
import io.oneshot.testing.TestServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Clients that hold connections without sending: slow headers and slow bodies are cut off at their
 * timeouts, and past {@code api.maxConnections} a new connection is closed at once while the open
 * ones go on being served.
 */
class SlowClientTest {
  private static TestServer t;
  private static int port;

  @BeforeAll
  static void start() {
    t =
        TestServer.with()
            .apiWith(
                "headerTimeout: 300ms, keepAliveTimeout: 600ms, bodyTimeout: 300ms,"
                    + " maxConnections: 3")
            .start();
    port = t.server.port();
  }

  @AfterAll
  static void stop() {
    t.close();
  }

  private static Socket open() throws IOException {
    Socket s = new Socket("127.0.0.1", port);
    // The bound on how long a test waits for the server's move, not a pause.
    s.setSoTimeout(10_000);
    return s;
  }

  private static void send(Socket s, String text) throws IOException {
    OutputStream out = s.getOutputStream();
    out.write(text.getBytes(StandardCharsets.UTF_8));
    out.flush();
  }

  /** Everything the server sends until it closes the connection. */
  private static String untilClosed(Socket s) throws IOException {
    InputStream in = s.getInputStream();
    return new String(in.readAllBytes(), StandardCharsets.UTF_8);
  }

  private static double refused(String reason) {
    Double v =
        PromText.parse(t.server.metrics().scrape())
            .value("oneshot_api_refused_total", "reason", reason);
    return v == null ? 0 : v;
  }

  @Test
  void headersNeverFinishedAreCutOff() throws IOException {
    double before = refused("slow_headers");
    try (Socket s = open()) {
      send(s, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ");
      assertThat(untilClosed(s)).isEmpty();
    }
    assertThat(refused("slow_headers")).isEqualTo(before + 1);
  }

  @Test
  void aConnectionThatSendsNothingIsCutOff() throws IOException {
    double before = refused("slow_headers");
    try (Socket s = open()) {
      assertThat(untilClosed(s)).isEmpty();
    }
    assertThat(refused("slow_headers")).isEqualTo(before + 1);
  }

  @Test
  void aBodyNeverFinishedIs408() throws IOException {
    double before = refused("slow_body");
    try (Socket s = open()) {
      send(
          s,
          "POST /api/v1/builds HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
              + TestServer.ADMIN_TOKEN
              + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tags\":");
      String answer = untilClosed(s);
      assertThat(answer).startsWith("HTTP/1.1 408").contains("\"field\":\"body\"");
      assertThat(answer).contains("body: not received within 300ms");
    }
    assertThat(refused("slow_body")).isEqualTo(before + 1);
    assertThat(io.oneshot.testing.Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
  }

  @Test
  void anIdleKeptAliveConnectionIsClosedAfterItsTimeout() throws IOException {
    try (Socket s = open()) {
      send(s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      String answer = untilClosed(s);
      assertThat(answer).startsWith("HTTP/1.1 200").contains("\"status\":\"ok\"");
    }
  }

  @Test
  void pastTheConnectionCapANewConnectionIsClosedAndTheOpenOnesAreServed() throws IOException {
    double before = refused("connections");
    List<Socket> held = new ArrayList<>();
    try {
      for (int i = 0; i < 3; i++) {
        Socket s = open();
        held.add(s);
        // Each connection is known to the server once it has answered on it.
        send(s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        assertThat(readResponse(s)).startsWith("HTTP/1.1 200");
      }
      try (Socket extra = open()) {
        send(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        String answer;
        try {
          answer = untilClosed(extra);
        } catch (java.net.SocketException reset) {
          answer = "";
        }
        assertThat(answer).isEmpty();
      }
      assertThat(refused("connections")).isEqualTo(before + 1);
      send(held.get(0), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      assertThat(readResponse(held.get(0))).startsWith("HTTP/1.1 200");
    } finally {
      for (Socket s : held) {
        s.close();
      }
      // The server counts a connection closed once its event loop has seen the close; until then
      // a new one is over the cap. The other tests open theirs after it has.
      org.awaitility.Awaitility.await()
          .atMost(10, java.util.concurrent.TimeUnit.SECONDS)
          .until(SlowClientTest::served);
    }
  }

  /** Whether a new connection is served now (not closed at once for the cap). */
  private static boolean served() {
    try (Socket s = open()) {
      send(s, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      return untilClosed(s).startsWith("HTTP/1.1 200");
    } catch (IOException e) {
      return false;
    }
  }

  /** One response of a kept-alive connection: its headers and as much body as its length says. */
  private static String readResponse(Socket s) throws IOException {
    InputStream in = s.getInputStream();
    StringBuilder head = new StringBuilder();
    while (!head.toString().endsWith("\r\n\r\n")) {
      int c = in.read();
      if (c < 0) {
        break;
      }
      head.append((char) c);
    }
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("(?i)content-length: *([0-9]+)").matcher(head);
    if (m.find()) {
      in.readNBytes(Integer.parseInt(m.group(1)));
    }
    return head.toString();
  }

  @Test
  void aClientThatSendsInTimeIsNotCutOff() throws IOException, SocketTimeoutException {
    try (Socket s = open()) {
      send(s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      assertThat(readResponse(s)).startsWith("HTTP/1.1 200");
      send(s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      assertThat(readResponse(s)).startsWith("HTTP/1.1 200");
    }
  }
}
