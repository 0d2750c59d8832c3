package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.function.Consumer;

/** The CLI's client for the admin API. Failures become {@link CliException}s with exit codes. */
final class ApiClient {
  private final HttpClient http;
  private final URI base;
  private final String token;

  ApiClient(String url, String token) {
    if (url == null || url.isBlank()) {
      throw new CliException(
          Main.USAGE, "no server URL: pass --url or set ONESHOT_URL (oneshot dev prints both)");
    }
    try {
      this.base = URI.create(url.endsWith("/") ? url : url + "/");
    } catch (IllegalArgumentException e) {
      throw new CliException(Main.USAGE, "--url: '" + url + "' is not a URL");
    }
    if (token == null || token.isBlank()) {
      throw new CliException(
          Main.USAGE,
          "no admin token: pass --token or set ONESHOT_TOKEN (oneshot dev writes both to <data-dir>/dev.env)");
    }
    this.token = token;
    this.http =
        HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(5))
            .version(HttpClient.Version.HTTP_1_1)
            .build();
  }

  JsonNode get(String path) {
    return send(request(path).GET().build());
  }

  /** A response body as text, as the server sent it (a workspace's state). */
  String text(String path) {
    HttpResponse<String> resp =
        exchange(request(path).GET().build(), HttpResponse.BodyHandlers.ofString());
    if (resp.statusCode() >= 300) {
      throw refused(resp.statusCode(), resp.body());
    }
    return resp.body();
  }

  JsonNode post(String path, String json) {
    return send(
        request(path)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json))
            .build());
  }

  /** Reads an NDJSON response line by line until the server ends it. */
  void stream(String path, Consumer<String> line) {
    HttpResponse<InputStream> resp =
        exchange(request(path).GET().build(), HttpResponse.BodyHandlers.ofInputStream());
    if (resp.statusCode() >= 300) {
      try (InputStream in = resp.body()) {
        throw refused(resp.statusCode(), new String(in.readAllBytes(), StandardCharsets.UTF_8));
      } catch (IOException e) {
        throw unreachable(e);
      }
    }
    try (BufferedReader r =
        new BufferedReader(new InputStreamReader(resp.body(), StandardCharsets.UTF_8))) {
      String l;
      while ((l = r.readLine()) != null) {
        if (!l.isEmpty()) {
          line.accept(l);
        }
      }
    } catch (IOException e) {
      throw new CliException(Main.UNREACHABLE, "the log stream broke off: " + e.getMessage());
    }
  }

  private HttpRequest.Builder request(String path) {
    return HttpRequest.newBuilder(base.resolve(path.startsWith("/") ? path.substring(1) : path))
        .header("Authorization", "Bearer " + token)
        .header("Accept", "application/json");
  }

  /** Sends the request; a connection that fails is {@link Main#UNREACHABLE}. */
  private <T> HttpResponse<T> exchange(HttpRequest req, HttpResponse.BodyHandler<T> body) {
    try {
      return http.send(req, body);
    } catch (IOException e) {
      throw unreachable(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CliException(Main.UNREACHABLE, "interrupted");
    }
  }

  private JsonNode send(HttpRequest req) {
    HttpResponse<String> resp = exchange(req, HttpResponse.BodyHandlers.ofString());
    if (resp.statusCode() >= 300) {
      throw refused(resp.statusCode(), resp.body());
    }
    return Json.tree(resp.body());
  }

  private CliException unreachable(IOException e) {
    String why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    return new CliException(
        Main.UNREACHABLE,
        "cannot reach oneshot at "
            + base
            + " ("
            + why
            + "); is it running? (oneshot dev prints its URL; set ONESHOT_URL or --url)");
  }

  private static CliException refused(int status, String body) {
    String error = "HTTP " + status;
    String detail = null;
    try {
      JsonNode n = Json.tree(body);
      if (n != null && n.hasNonNull("error")) {
        error = n.get("error").asText();
        detail = n.hasNonNull("detail") ? n.get("detail").asText() : null;
      }
    } catch (RuntimeException e) {
      // not JSON: keep the status
    }
    String msg = detail == null || detail.isEmpty() ? error : error + "\n  " + detail;
    if (status == 401) {
      msg += "\n  (the token comes from --token or ONESHOT_TOKEN)";
    }
    return new CliException(status >= 500 ? Main.UNREACHABLE : Main.USAGE, msg);
  }
}
