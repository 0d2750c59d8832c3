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
    rejectUnknownFields(body, allowed, "");
  }

  /** {@link #rejectUnknownFields(JsonNode, Set)} for an object at {@code prefix} of the body. */
  static void rejectUnknownFields(JsonNode body, Set<String> allowed, String prefix) {
    for (Iterator<String> it = body.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!allowed.contains(f)) {
        throw ApiError.badRequest(prefix + f, "unknown field");
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
      // What failed inside stays in the log: the answer names only the line to look for.
      String ref = Long.toHexString(java.util.concurrent.ThreadLocalRandom.current().nextLong());
      log.error("{} {} failed (error {}).", ctx.request().method(), ctx.request().path(), ref, t);
      json(
          ctx,
          500,
          errorBody("internal error", "the dispatcher's log says more under error " + ref, null));
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
    return readObject(bodyBytes(ctx), ctx.request().getHeader("Content-Type"), keepNul);
  }

  /** The body's bytes; null when it has none (Vert.x gives an empty body no buffer). */
  private static byte[] bodyBytes(RoutingContext ctx) {
    io.vertx.core.buffer.Buffer raw = ctx.body() == null ? null : ctx.body().buffer();
    return raw == null ? null : raw.getBytes();
  }

  /**
   * The body of a call that takes none: nothing, or an empty JSON object ({@code {}}) read as
   * strictly as any other; anything else is a 400, so that a client that thinks it sent options
   * learns that none exist.
   */
  static void emptyBody(RoutingContext ctx) {
    byte[] bytes = bodyBytes(ctx);
    if (bytes == null || bytes.length == 0) {
      return;
    }
    rejectUnknownFields(bodyObject(ctx), Set.of());
  }

  /**
   * The body of a call whose options are all optional: nothing (an empty object in its place), or
   * an object of those {@code fields} alone, read as strictly as any other.
   */
  static JsonNode optionalBody(RoutingContext ctx, Set<String> fields) {
    byte[] bytes = bodyBytes(ctx);
    if (bytes == null || bytes.length == 0) {
      return Json.MAPPER.createObjectNode();
    }
    JsonNode body = bodyObject(ctx);
    rejectUnknownFields(body, fields);
    return body;
  }

  /** The NUL character, which no text PostgreSQL stores may hold. */
  static final char NUL = '\u0000';

  /**
   * Refuses, in one walk of the body, what parsed but cannot be stored or read back: a NUL in a key
   * or a string (but at the paths {@code keepNul} accepts), a {@code \\ud800} escape without its
   * pair (UTF-8 has no encoding for it, PostgreSQL no place), and a number past a double's range
   * ({@code 1e400}, which would be read as infinity).
   */
  private static void refuseUnstorable(
      JsonNode n, String path, java.util.function.Predicate<String> keepNul) {
    String at = path.isEmpty() ? "body" : path;
    if (n.isTextual()) {
      if (n.textValue().indexOf(NUL) >= 0 && !keepNul.test(path)) {
        throw ApiError.badRequest(path, "must not contain a NUL character (\\u0000)");
      }
      if (unpairedSurrogate(n.textValue())) {
        throw ApiError.badRequest(at, "not valid UTF-8: an unpaired surrogate escape (\\ud800)");
      }
    } else if (n.isDouble() && !Double.isFinite(n.doubleValue())) {
      throw ApiError.badRequest(at, "a number out of range");
    } else if (n.isObject()) {
      for (var e : n.properties()) {
        if (e.getKey().indexOf(NUL) >= 0) {
          throw ApiError.badRequest(
              at, "has a key with a NUL character (\\u0000): " + e.getKey().replace(NUL, '?'));
        }
        if (unpairedSurrogate(e.getKey())) {
          throw ApiError.badRequest(
              at, "has a key that is not valid UTF-8 (an unpaired surrogate escape)");
        }
        refuseUnstorable(
            e.getValue(), path.isEmpty() ? e.getKey() : path + "." + e.getKey(), keepNul);
      }
    } else if (n.isArray()) {
      for (int i = 0; i < n.size(); i++) {
        refuseUnstorable(n.get(i), path + "[" + i + "]", keepNul);
      }
    }
  }

  /** The longest query parameter value (and decoded path) the API reads, in characters. */
  static final int MAX_PARAM_CHARS = 1024;

  /**
   * Checks what every request carries before any handler reads it: the decoded path and every query
   * parameter must be UTF-8 (percent-encoded bytes included), hold no NUL and no more than {@link
   * #MAX_PARAM_CHARS} characters; a refusal is a 400 naming the parameter.
   */
  static void checkParams(RoutingContext ctx) {
    checkPathAndQuery(ctx.request().path(), ctx.request().query());
    ctx.next();
  }

  /**
   * {@link #checkParams}'s checks of a request's raw (still percent-encoded) path and query: a
   * refusal is an {@link ApiError}, a 400 naming the part.
   */
  static void checkPathAndQuery(String rawPath, String query) {
    String path = strictDecode(rawPath == null ? "" : rawPath, "path", false);
    if (path.indexOf(NUL) >= 0) {
      throw ApiError.badRequest("path", "must not contain a NUL character (%00)");
    }
    if (path.length() > MAX_PARAM_CHARS) {
      throw ApiError.badRequest("path", "is longer than " + MAX_PARAM_CHARS + " characters");
    }
    if (query != null && !query.isEmpty()) {
      for (String pair : query.split("&")) {
        int eq = pair.indexOf('=');
        String name = strictDecode(eq < 0 ? pair : pair.substring(0, eq), "query", true);
        if (name.indexOf(NUL) >= 0 || name.length() > 64) {
          throw ApiError.badRequest("query", "has a parameter name that is not one");
        }
        String value = eq < 0 ? "" : strictDecode(pair.substring(eq + 1), name, true);
        if (value.indexOf(NUL) >= 0) {
          throw ApiError.badRequest(name, "must not contain a NUL character (%00)");
        }
        if (value.length() > MAX_PARAM_CHARS) {
          throw ApiError.badRequest(name, "is longer than " + MAX_PARAM_CHARS + " characters");
        }
      }
    }
  }

  /**
   * Percent-decodes {@code s} ({@code +} as a space when {@code plus}) and reads the bytes as
   * UTF-8, refusing a malformed escape or an invalid byte sequence as a 400 naming {@code field}.
   */
  private static String strictDecode(String s, String field, boolean plus) {
    if (s.indexOf('%') < 0 && (!plus || s.indexOf('+') < 0)) {
      return s;
    }
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream(s.length());
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '%') {
        int hi = i + 2 < s.length() ? Character.digit(s.charAt(i + 1), 16) : -1;
        int lo = hi < 0 ? -1 : Character.digit(s.charAt(i + 2), 16);
        if (lo < 0) {
          throw ApiError.badRequest(field, "has a malformed percent-escape");
        }
        bytes.write(hi * 16 + lo);
        i += 2;
      } else if (c == '+' && plus) {
        bytes.write(' ');
      } else {
        byte[] b = String.valueOf(c).getBytes(StandardCharsets.UTF_8);
        bytes.write(b, 0, b.length);
      }
    }
    try {
      return strictUtf8().decode(java.nio.ByteBuffer.wrap(bytes.toByteArray())).toString();
    } catch (java.nio.charset.CharacterCodingException e) {
      throw ApiError.badRequest(field, "not valid UTF-8");
    }
  }

  /**
   * A query parameter's text: {@link #checkParams} has refused every one with a NUL, bytes that are
   * not UTF-8 or too long a value before any handler asks.
   */
  static String queryText(RoutingContext ctx, String name) {
    return ctx.queryParams().get(name);
  }

  /**
   * A body's {@code bytes} sent with {@code contentType}, read strictly as a JSON object: it must
   * say {@code Content-Type: application/json} (415 otherwise), be UTF-8 (an invalid byte sequence
   * is a 400 naming the field that holds it), hold one object with no key twice and nothing after
   * it, and nothing {@link #refuseUnstorable} refuses. Anything else a client can send is an {@link
   * ApiError}, a 4xx naming the field.
   */
  static JsonNode readObject(
      byte[] bytes, String contentType, java.util.function.Predicate<String> keepNul) {
    if (bytes == null || bytes.length == 0) {
      throw new ApiError(400, "body: a JSON object is required", null, "body");
    }
    requireJson(contentType);
    int bad = invalidUtf8At(bytes);
    if (bad >= 0) {
      String at = fieldBefore(bytes, bad);
      throw new ApiError(
          400,
          at + ": not valid UTF-8",
          "the byte sequence at byte " + bad + " of the body is not UTF-8",
          at);
    }
    JsonNode n;
    try {
      n = Json.REQUEST.readTree(bytes);
    } catch (JsonProcessingException e) {
      String at = fieldAt(e);
      String why = problem(e);
      if (why.startsWith("Duplicate field")) {
        throw new ApiError(400, at + ": given twice", "each key may appear once", at);
      }
      throw new ApiError(
          400,
          "body: malformed JSON",
          why
              + (e.getLocation() == null
                  ? ""
                  : " at line "
                      + e.getLocation().getLineNr()
                      + ", column "
                      + e.getLocation().getColumnNr()),
          "body");
    } catch (java.io.IOException e) {
      throw new ApiError(400, "body: cannot be read", e.getMessage(), "body");
    }
    if (!(n instanceof ObjectNode)) {
      throw new ApiError(400, "body: must be a JSON object", null, "body");
    }
    refuseUnstorable(n, "", keepNul);
    return n;
  }

  private static boolean unpairedSurrogate(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) {
          return true;
        }
        i++;
      } else if (Character.isLowSurrogate(c)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Where {@code bytes} stop being UTF-8 (an invalid byte, a sequence cut short, an overlong form,
   * an encoded surrogate), or -1: Java's decoder is strict where the JSON parser is lenient.
   */
  static int invalidUtf8At(byte[] bytes) {
    java.nio.ByteBuffer in = java.nio.ByteBuffer.wrap(bytes);
    java.nio.CharBuffer out = java.nio.CharBuffer.allocate(Math.min(bytes.length, 8192));
    java.nio.charset.CharsetDecoder d = strictUtf8();
    while (true) {
      java.nio.charset.CoderResult r = d.decode(in, out, true);
      if (r.isError()) {
        return in.position();
      }
      if (r.isUnderflow()) {
        return d.flush(out).isError() ? in.position() : -1;
      }
      out.clear();
    }
  }

  /** A UTF-8 decoder that reports what is not UTF-8 instead of replacing it. */
  private static java.nio.charset.CharsetDecoder strictUtf8() {
    return StandardCharsets.UTF_8
        .newDecoder()
        .onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
        .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT);
  }

  /** The field the JSON of {@code bytes} is in at byte {@code end}: the body read up to there. */
  private static String fieldBefore(byte[] bytes, int end) {
    try (com.fasterxml.jackson.core.JsonParser p =
        Json.MAPPER.getFactory().createParser(bytes, 0, end)) {
      while (p.nextToken() != null) {
        // read to where the bad bytes begin
      }
      return "body";
    } catch (JsonProcessingException e) {
      return fieldAt(e);
    } catch (java.io.IOException e) {
      return "body";
    }
  }

  /**
   * Refuses a body that does not say it is JSON: {@code application/json}, with at most a {@code
   * charset=utf-8} parameter. A form or plain text is not read as JSON by accident.
   */
  static void requireJson(String contentType) {
    String type = contentType == null ? "" : contentType;
    // -1: a type of only separators (";", found by the fuzzer) still has a first part to refuse.
    String[] parts = type.split(";", -1);
    boolean json = parts[0].strip().equalsIgnoreCase("application/json");
    for (int i = 1; json && i < parts.length; i++) {
      String param = parts[i].strip().toLowerCase(java.util.Locale.ROOT).replace("\"", "");
      json = param.isEmpty() || param.equals("charset=utf-8");
    }
    if (!json) {
      throw new ApiError(
          415,
          "Content-Type: must be application/json",
          contentType == null ? "the request has no Content-Type" : "the request says " + type,
          "Content-Type");
    }
  }

  /**
   * What a JSON parser said was wrong, without the parser's own location text ({@code (start marker
   * at [Source: ...])}), cut to 200 characters: the answer gives line and column itself.
   */
  static String problem(JsonProcessingException e) {
    String why =
        e.getOriginalMessage() == null ? e.getClass().getSimpleName() : e.getOriginalMessage();
    int at = why.indexOf(" (start marker at [Source");
    if (at < 0) {
      at = why.indexOf("\n at [Source");
    }
    if (at >= 0) {
      why = why.substring(0, at);
    }
    return Visible.text(why, 200);
  }

  /** The dotted path of the field a parse error met ({@code input.env.A}), else {@code body}. */
  private static String fieldAt(JsonProcessingException e) {
    if (!(e.getProcessor() instanceof com.fasterxml.jackson.core.JsonParser p)) {
      return "body";
    }
    java.util.ArrayDeque<String> parts = new java.util.ArrayDeque<>();
    for (com.fasterxml.jackson.core.JsonStreamContext c = p.getParsingContext();
        c != null && !c.inRoot();
        c = c.getParent()) {
      if (c.inArray()) {
        parts.push("[" + Math.max(0, c.getCurrentIndex()) + "]");
      } else if (c.getCurrentName() != null) {
        parts.push("." + c.getCurrentName());
      }
    }
    String path = String.join("", parts);
    return path.isEmpty() ? "body" : path.startsWith(".") ? path.substring(1) : path;
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

  /** A string field: null when absent or null, a 400 naming it when it is not a string. */
  static String textOrNull(JsonNode n, String field) {
    return textOrNull(n, field, field);
  }

  /** {@link #textOrNull(JsonNode, String)}, naming the field {@code path} in a refusal. */
  static String textOrNull(JsonNode n, String field, String path) {
    JsonNode v = n.path(field);
    if (v.isMissingNode() || v.isNull()) {
      return null;
    }
    if (!v.isTextual()) {
      throw ApiError.badRequest(path, "must be a string");
    }
    return v.textValue();
  }

  /**
   * An integer field within {@code [min, max]}: null when absent or null, a 400 naming it when it
   * is a fraction, a string, or out of range.
   */
  static Long longOrNull(JsonNode n, String field, long min, long max) {
    return longOrNull(n, field, min, max, field);
  }

  /** {@link #longOrNull(JsonNode, String, long, long)}, the field named {@code name} in a 400. */
  static Long longOrNull(JsonNode n, String field, long min, long max, String name) {
    JsonNode v = n.path(field);
    if (v.isMissingNode() || v.isNull()) {
      return null;
    }
    if (!v.isIntegralNumber()
        || !v.canConvertToLong()
        || v.longValue() < min
        || v.longValue() > max) {
      throw ApiError.badRequest(name, "must be an integer from " + min + " to " + max);
    }
    return v.longValue();
  }

  static String emptyToNull(String s) {
    return s == null || s.isEmpty() ? null : s;
  }
}
