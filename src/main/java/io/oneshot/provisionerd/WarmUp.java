package io.oneshot.provisionerd;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/**
 * One script build from acquire to completion against a runner API served in this process, on
 * loopback, with nothing else: what an image's build runs under {@code -XX:ArchiveClassesAtExit} so
 * that its class data sharing archive holds the classes a build's provisionerd loads (the HTTP
 * client, the JSON reader, the log shipper, the process it starts), not only those of its command
 * line. The answers are the API's shapes ({@code api/RunnerApi}).
 */
public final class WarmUp {
  private WarmUp() {}

  /** The build's input: a shell command, as a script build's is. */
  static final String ACQUIRED =
      "{\"buildId\": 0, \"attempt\": 1, \"route\": \"warm-up\", \"input\": {\"provisioner\":"
          + " \"script\", \"command\": [\"sh\", \"-c\", \"echo warm-up\"]}, \"timeoutMs\": 60000,"
          + " \"cancelGraceMs\": 1000, \"heartbeatIntervalMs\": 1000, \"leaseMs\": 30000}";

  /** Runs the build; returns provisionerd's exit code (0: it ran and was reported). */
  public static int run() {
    HttpServer server;
    try {
      server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot serve the warm-up's API", e);
    }
    server.createContext(
        "/api/v1/runner/",
        x -> {
          x.getRequestBody().readAllBytes();
          String call = x.getRequestURI().getPath().substring("/api/v1/runner/".length());
          String reply =
              switch (call) {
                case "acquire" -> ACQUIRED;
                case "complete" -> "{\"status\": \"succeeded\"}";
                default -> "{\"cancelRequested\": false}";
              };
          byte[] body = reply.getBytes(StandardCharsets.UTF_8);
          x.getResponseHeaders().set("Content-Type", "application/json");
          x.sendResponseHeaders(200, body.length);
          try (OutputStream o = x.getResponseBody()) {
            o.write(body);
          }
        });
    server.start();
    Path work = null;
    try {
      work = Files.createTempDirectory("oneshot-warm-up");
      URI api = URI.create("http://127.0.0.1:" + server.getAddress().getPort());
      return Provisionerd.run(
          new Provisionerd.Options(api, "warm-up", work, Duration.ofSeconds(10)),
          new PrintStream(OutputStream.nullOutputStream(), true, StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot make the warm-up's work directory", e);
    } finally {
      server.stop(0);
      if (work != null) {
        try {
          Files.deleteIfExists(work);
        } catch (IOException e) {
          // an empty directory in the temporary directory of an image's build
        }
      }
    }
  }
}
