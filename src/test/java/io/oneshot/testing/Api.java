package io.oneshot.testing;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** A small HTTP client for the API, for tests: every call returns status and parsed body. */
public final class Api {
  /** A response; {@code json} is null when the body is not JSON. */
  public record Response(int status, JsonNode json, String text) {}

  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();
  private final String base;
  private final String token;

  public Api(String base, String token) {
    this.base = base;
    this.token = token;
  }

  public String base() {
    return base;
  }

  public Response get(String path) {
    return send(builder(path, token).GET().build());
  }

  public Response post(String path, String body) {
    return post(path, body, token);
  }

  /** A call with any method and no body. */
  public Response call(String method, String path) {
    return send(builder(path, token).method(method, HttpRequest.BodyPublishers.noBody()).build());
  }

  /** The runner id runner calls carry unless a test names another. */
  public static final String RUNNER = "test-runner-1";

  /** A runner call names {@link #RUNNER}, as one provisionerd would. */
  public Response post(String path, String body, String bearer) {
    return post(path, body, bearer, path.startsWith("/api/v1/runner/") ? RUNNER : null);
  }

  /** A call naming the runner {@code runnerId} ({@code Oneshot-Runner-Id}; null: none). */
  public Response post(String path, String body, String bearer, String runnerId) {
    HttpRequest.Builder b =
        builder(path, bearer)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (runnerId != null) {
      b.header("Oneshot-Runner-Id", runnerId);
    }
    return send(b.build());
  }

  /**
   * A call as a hostile client would send it: any method, body bytes as they are, any Content-Type
   * (null: none), and extra headers (name, value, ...).
   */
  public Response raw(
      String method,
      String path,
      byte[] body,
      String contentType,
      String bearer,
      String... headers) {
    HttpRequest.Builder b =
        builder(path, bearer)
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofByteArray(body));
    if (contentType != null) {
      b.header("Content-Type", contentType);
    }
    for (int i = 0; i + 1 < headers.length; i += 2) {
      b.header(headers[i], headers[i + 1]);
    }
    return send(b.build());
  }

  /**
   * Runs an attempt as its provisionerd would, with nothing in between: acquires with the attempt's
   * {@code token}, completes it as succeeded with terraform {@code state}, and returns the
   * acquire's answer (with the state it was handed).
   */
  public JsonNode acquireAndComplete(String token, String state) {
    Response acquired = post("/api/v1/runner/acquire", "{}", token);
    if (acquired.status() != 200) {
      throw new IllegalStateException(
          "acquire failed: " + acquired.status() + " " + acquired.text());
    }
    Response done =
        post(
            "/api/v1/runner/complete",
            "{\"outcome\": \"succeeded\", \"state\": " + Json.write(state) + "}",
            token);
    if (done.status() != 200) {
      throw new IllegalStateException("complete failed: " + done.status() + " " + done.text());
    }
    return acquired.json();
  }

  /** Enqueues a script build and returns its id. */
  public long submitScript(String tagsJson, String script) {
    return submitScript(tagsJson, null, script);
  }

  /** Enqueues a script build on a workspace ({@code null}: none) and returns its id. */
  public long submitScript(String tagsJson, String workspace, String script) {
    Response r =
        post(
            "/api/v1/builds",
            "{\"tags\": "
                + tagsJson
                + (workspace == null ? "" : ", \"workspace\": " + Json.write(workspace))
                + ", \"input\": {\"provisioner\": \"script\", \"command\": [\"sh\", \"-c\", "
                + Json.write(script)
                + "]}}");
    if (r.status() != 201) {
      throw new IllegalStateException("submit failed: " + r.status() + " " + r.text());
    }
    return r.json().path("id").asLong();
  }

  /** Submits a terraform apply of one {@code main.tf} on a workspace; returns the build's id. */
  public long submitTerraform(String workspace, String mainTf) {
    Response r =
        post(
            "/api/v1/builds",
            "{\"workspace\": "
                + Json.write(workspace)
                + ", \"input\": {\"provisioner\": \"terraform\", \"files\": {\"main.tf\": "
                + Json.write(mainTf)
                + "}}}");
    if (r.status() != 201) {
      throw new IllegalStateException("submit failed: " + r.status() + " " + r.text());
    }
    return r.json().path("id").asLong();
  }

  private HttpRequest.Builder builder(String path, String bearer) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(30));
    if (bearer != null) {
      b.header("Authorization", "Bearer " + bearer);
    }
    return b;
  }

  private Response send(HttpRequest req) {
    try {
      HttpResponse<String> r = http.send(req, HttpResponse.BodyHandlers.ofString());
      JsonNode json = null;
      try {
        json = Json.MAPPER.readTree(r.body());
      } catch (IOException e) {
        // not JSON (NDJSON logs, for one)
      }
      return new Response(r.statusCode(), json, r.body());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
