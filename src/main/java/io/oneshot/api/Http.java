package io.oneshot.api;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.build.InvalidBuildException;
import io.oneshot.build.QueueStore;
import io.oneshot.config.Units;
import io.vertx.core.Handler;
import io.vertx.ext.web.RoutingContext;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What every handler of the API shares: bearer authentication, the JSON body and parameters read
 * with a 400 naming the field, and errors answered as {@code {error, detail, field}}.
 */
final class Http {
  private static final Logger log = LoggerFactory.getLogger(ApiServer.class);

  private Http() {}

  /** Lets a request through only with {@code Authorization: Bearer <token>}. */
  static Handler<RoutingContext> requireBearer(byte[] token, String what) {
    return ctx -> {
      String given = bearer(ctx);
      if (given == null) {
        throw unauthorized("missing Authorization: Bearer <" + what + ">");
      }
      if (!MessageDigest.isEqual(given.getBytes(StandardCharsets.UTF_8), token)) {
        throw unauthorized("the " + what + " is wrong");
      }
      ctx.next();
    };
  }

  /** Refuses a body with a field outside {@code allowed}, naming it. */
  static void rejectUnknownFields(JsonNode body, Set<String> allowed) {
    for (Iterator<String> it = body.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!allowed.contains(f)) {
        throw ApiError.badRequest(f, "unknown field");
      }
    }
  }

  /** Answers a failed request (a handler threw, or the router refused it) as a JSON error. */
  static Handler<RoutingContext> failureHandler(long maxRequestBytes) {
    return ctx -> {
      Throwable e = ctx.failure();
      if (e == null) {
        int code = ctx.statusCode();
        String error =
            switch (code) {
              case 413 -> "body: larger than the limit of " + Units.formatSize(maxRequestBytes);
              case 405 -> "method not allowed";
              default -> "request failed";
            };
        json(ctx, code < 400 ? 500 : code, errorBody(error, null, code == 413 ? "body" : null));
        return;
      }
      fail(ctx, e);
    };
  }

  static void fail(RoutingContext ctx, Throwable e) {
    if (ctx.response().ended() || ctx.response().closed()) {
      return;
    }
    Throwable t = QueueStore.translate(e);
    if (t instanceof ApiError a) {
      json(ctx, a.status(), errorBody(a.getMessage(), a.detail(), a.field()));
    } else if (t instanceof InvalidBuildException ib) {
      json(ctx, 400, errorBody(ib.getMessage(), ib.hint(), ib.field()));
    } else {
      log.error("{} {} failed.", ctx.request().method(), ctx.request().path(), t);
      json(
          ctx,
          500,
          errorBody("internal error: " + t.getMessage(), "see the dispatcher's log", null));
    }
  }

  static Map<String, Object> errorBody(String error, String detail, String field) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("error", error);
    body.put("detail", detail);
    if (field != null) {
      body.put("field", field);
    }
    return body;
  }

  static void json(RoutingContext ctx, int status, Object body) {
    if (ctx.response().ended() || ctx.response().closed()) {
      return;
    }
    ctx.response()
        .setStatusCode(status)
        .putHeader("Content-Type", "application/json")
        .end(Json.write(body));
  }

  static ApiError unauthorized(String detail) {
    return new ApiError(401, "unauthorized", detail, null);
  }

  static String bearer(RoutingContext ctx) {
    String h = ctx.request().getHeader("Authorization");
    if (h == null || !h.regionMatches(true, 0, "Bearer ", 0, 7)) {
      return null;
    }
    return h.substring(7).strip();
  }

  /**
   * The request's body, a JSON object whose every key and string holds no NUL character (PostgreSQL
   * stores neither in text nor in jsonb): one is a 400 naming where it is, before anything is
   * written.
   */
  static JsonNode bodyObject(RoutingContext ctx) {
    return bodyObject(ctx, path -> false);
  }

  /**
   * {@link #bodyObject(RoutingContext)}, leaving NULs in the strings at the paths {@code keepNul}
   * accepts (a runner's log text, whose NULs are replaced rather than refused).
   */
  static JsonNode bodyObject(RoutingContext ctx, java.util.function.Predicate<String> keepNul) {
    JsonNode n = parseObject(ctx);
    refuseNul(n, "", keepNul);
    return n;
  }

  /** The NUL character, which no text PostgreSQL stores may hold. */
  static final char NUL = '\u0000';

  private static void refuseNul(
      JsonNode n, String path, java.util.function.Predicate<String> keepNul) {
    if (n.isTextual()) {
      if (n.textValue().indexOf(NUL) >= 0 && !keepNul.test(path)) {
        throw ApiError.badRequest(path, "must not contain a NUL character (\\u0000)");
      }
    } else if (n.isObject()) {
      for (var e : n.properties()) {
        String at = path.isEmpty() ? e.getKey() : path + "." + e.getKey();
        if (e.getKey().indexOf(NUL) >= 0) {
          throw ApiError.badRequest(
              path.isEmpty() ? "body" : path,
              "has a key with a NUL character (\\u0000): " + e.getKey().replace(NUL, '?'));
        }
        refuseNul(e.getValue(), at, keepNul);
      }
    } else if (n.isArray()) {
      for (int i = 0; i < n.size(); i++) {
        refuseNul(n.get(i), path + "[" + i + "]", keepNul);
      }
    }
  }

  /** A query parameter's text; a NUL in it is a 400 naming it. */
  static String queryText(RoutingContext ctx, String name) {
    String v = ctx.queryParams().get(name);
    if (v != null && v.indexOf(NUL) >= 0) {
      throw ApiError.badRequest(name, "must not contain a NUL character (\\u0000)");
    }
    return v;
  }

  private static JsonNode parseObject(RoutingContext ctx) {
    String text = ctx.body() == null ? null : ctx.body().asString();
    if (text == null || text.isBlank()) {
      throw new ApiError(400, "body: a JSON object is required", null, "body");
    }
    JsonNode n;
    try {
      n = Json.MAPPER.readTree(text);
    } catch (JsonProcessingException e) {
      throw new ApiError(
          400,
          "body: malformed JSON",
          e.getOriginalMessage()
              + (e.getLocation() == null
                  ? ""
                  : " at line "
                      + e.getLocation().getLineNr()
                      + ", column "
                      + e.getLocation().getColumnNr()),
          "body");
    }
    if (!(n instanceof ObjectNode)) {
      throw new ApiError(400, "body: must be a JSON object", null, "body");
    }
    return n;
  }

  static long buildId(RoutingContext ctx) {
    String s = ctx.pathParam("id");
    try {
      long id = Long.parseLong(s);
      if (id > 0) {
        return id;
      }
    } catch (NumberFormatException e) {
      // below
    }
    throw new ApiError(404, "build " + s + " not found", "build ids are positive integers", "id");
  }

  static int intParam(RoutingContext ctx, String name, int fallback, int min, int max) {
    String s = ctx.queryParams().get(name);
    if (s == null || s.isEmpty()) {
      return fallback;
    }
    try {
      int v = Integer.parseInt(s);
      if (v >= min && v <= max) {
        return v;
      }
    } catch (NumberFormatException e) {
      // below
    }
    throw ApiError.badRequest(name, "must be an integer from " + min + " to " + max);
  }

  static Long longParam(RoutingContext ctx, String name) {
    String s = ctx.queryParams().get(name);
    if (s == null || s.isEmpty()) {
      return null;
    }
    try {
      long v = Long.parseLong(s);
      if (v >= 0) {
        return v;
      }
    } catch (NumberFormatException e) {
      // below
    }
    throw ApiError.badRequest(name, "must be a non-negative integer");
  }

  static String requiredParam(RoutingContext ctx, String name) {
    String v = queryText(ctx, name);
    if (v == null || v.isEmpty()) {
      throw ApiError.badRequest(name, "is required");
    }
    return v;
  }

  static String textOrNull(JsonNode n, String field) {
    JsonNode v = n.path(field);
    return v.isTextual() ? v.asText() : null;
  }

  static String emptyToNull(String s) {
    return s == null || s.isEmpty() ? null : s;
  }
}
