package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.function.Consumer;

/**
 * The CLI's client for the admin API. Failures become {@link CliException}s with exit codes.
 *
 * <p>On {@link HttpURLConnection}: a CLI call makes one or two requests and ends, and
 * java.net.http's client cost 0.3 s of a call to set up (its selector thread, and an SSL context
 * made even for a plain http URL), against 0.02 s for this.
 */
final class ApiClient {
  private static final int CONNECT_TIMEOUT_MS = 5_000;

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
  }

  JsonNode get(String path) {
    return Json.tree(text(path));
  }

  /** A response body as text, as the server sent it (a workspace's state). */
  String text(String path) {
    return answer(open(path, "GET", null));
  }

  JsonNode post(String path, String json) {
    return Json.tree(answer(open(path, "POST", json)));
  }

  /** Reads an NDJSON response line by line until the server ends it. */
  void stream(String path, Consumer<String> line) {
    HttpURLConnection c = open(path, "GET", null);
    int status = status(c);
    if (status >= 300) {
      throw refused(status, body(c, status));
    }
    try (BufferedReader r =
        new BufferedReader(new InputStreamReader(c.getInputStream(), StandardCharsets.UTF_8))) {
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

  /**
   * A request sent ({@code body}: JSON, or null for none); a connection that fails is {@link
   * Main#UNREACHABLE}. Redirects are not followed (an answer of 3xx is refused, as any not 2xx).
   */
  private HttpURLConnection open(String path, String method, String body) {
    try {
      HttpURLConnection c =
          (HttpURLConnection)
              base.resolve(path.startsWith("/") ? path.substring(1) : path)
                  .toURL()
                  .openConnection();
      c.setConnectTimeout(CONNECT_TIMEOUT_MS);
      c.setInstanceFollowRedirects(false);
      c.setUseCaches(false);
      c.setRequestMethod(method);
      c.setRequestProperty("Authorization", "Bearer " + token);
      c.setRequestProperty("Accept", "application/json");
      if (body != null) {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        c.setDoOutput(true);
        c.setFixedLengthStreamingMode(bytes.length);
        c.setRequestProperty("Content-Type", "application/json");
        try (OutputStream out = c.getOutputStream()) {
          out.write(bytes);
        }
      }
      return c;
    } catch (IOException e) {
      throw unreachable(e);
    }
  }

  private int status(HttpURLConnection c) {
    try {
      return c.getResponseCode();
    } catch (IOException e) {
      throw unreachable(e);
    }
  }

  /** The answer's body when it is a 2xx; otherwise the refusal it says. */
  private String answer(HttpURLConnection c) {
    int status = status(c);
    String body = body(c, status);
    if (status >= 300) {
      throw refused(status, body);
    }
    return body;
  }

  private String body(HttpURLConnection c, int status) {
    try (InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream()) {
      return in == null ? "" : new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw unreachable(e);
    }
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
