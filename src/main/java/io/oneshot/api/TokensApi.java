package io.oneshot.api;

import static io.oneshot.api.Http.bodyObject;
import static io.oneshot.api.Http.emptyToNull;
import static io.oneshot.api.Http.fail;
import static io.oneshot.api.Http.intParam;
import static io.oneshot.api.Http.json;
import static io.oneshot.api.Http.longParam;
import static io.oneshot.api.Http.rejectUnknownFields;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.AuditStore;
import io.oneshot.build.BuildStore;
import io.oneshot.build.TokenStore;
import io.oneshot.build.TokenStore.Role;
import io.oneshot.config.Units;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * API tokens and the audit trail, for the admin token alone: {@code /api/v1/tokens} (create, list,
 * revoke) and {@code /api/v1/audit}.
 */
final class TokensApi {
  private static final Logger log = LoggerFactory.getLogger(TokensApi.class);
  private static final Set<String> CREATE_FIELDS =
      Set.of("name", "owner", "role", "routes", "routeTags", "expiresIn", "expiresAt");

  /** The longest owner a token records, in characters. */
  static final int MAX_OWNER_CHARS = 200;

  /** The most tags a token's routeTags may hold. */
  static final int MAX_ROUTE_TAGS = 16;

  /** The longest tag key and value of routeTags, in characters. */
  static final int MAX_TAG_CHARS = 255;

  /**
   * The longest a token may live: {@code expiresIn} and {@code expiresAt} beyond it are refused.
   */
  static final Duration MAX_LIFETIME = Duration.ofDays(36_500);

  private final BuildStore store;
  private final Access access;
  private final List<io.oneshot.config.OneshotConfig.Route> routes;

  TokensApi(BuildStore store, Access access, List<io.oneshot.config.OneshotConfig.Route> routes) {
    this.store = store;
    this.access = access;
    this.routes = routes;
  }

  void mount(Router router) {
    router.post("/api/v1/tokens").handler(this::create);
    router.get("/api/v1/tokens").handler(this::list);
    router.post("/api/v1/tokens/:name/revoke").handler(this::revoke);
    router.get("/api/v1/audit").handler(this::audit);
  }

  private void requireAdmin(RoutingContext ctx, String what) {
    if (!Access.caller(ctx).admin()) {
      throw access.adminOnly(ctx, what);
    }
  }

  private void create(RoutingContext ctx) {
    requireAdmin(ctx, "creating a token");
    JsonNode body = bodyObject(ctx);
    rejectUnknownFields(body, CREATE_FIELDS);
    String name = Http.textOrNull(body, "name");
    String nameRule =
        "lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, at most"
            + " 63";
    if (name == null) {
      throw ApiError.badRequest("name", "is required: " + nameRule);
    }
    if (!name.matches("[a-z0-9][a-z0-9._-]{0,62}")) {
      throw ApiError.badRequest(
          "name", "'" + Visible.text(name, 80) + "' is not a token name: " + nameRule);
    }
    String owner = Http.textOrNull(body, "owner");
    if (owner != null
        && (owner.length() > MAX_OWNER_CHARS
            || owner.codePoints().anyMatch(Character::isISOControl))) {
      throw ApiError.badRequest(
          "owner", "at most " + MAX_OWNER_CHARS + " characters, none of them a control character");
    }
    String roleText = Http.textOrNull(body, "role");
    Role role = role(roleText);
    if (role == null) {
      throw ApiError.badRequest(
          "role",
          (roleText == null ? "is required" : "'" + roleText + "' is not a role")
              + ": viewer (reads), submitter (also submits, and cancels its own builds) or"
              + " operator (also cancels any build of its routes and reads their state)");
    }
    Set<String> configured = new java.util.TreeSet<>();
    routes.forEach(route -> configured.add(route.name()));
    List<String> names = new ArrayList<>();
    JsonNode r = body.path("routes");
    if (!r.isMissingNode() && !r.isNull()) {
      if (!r.isArray()) {
        throw ApiError.badRequest("routes", "must be a list of route names ('*': every route)");
      }
      for (int i = 0; i < r.size(); i++) {
        JsonNode n = r.get(i);
        String at = "routes[" + i + "]";
        if (!n.isTextual()) {
          throw ApiError.badRequest(at, "must be a route name");
        }
        String route = n.textValue();
        if (!route.equals("*") && !configured.contains(route)) {
          throw new ApiError(
              400,
              at + ": no route is named '" + Visible.text(route, 64) + "'",
              "the configured routes: " + String.join(", ", configured) + " ('*': every route)",
              at);
        }
        if (!names.contains(route)) {
          names.add(route);
        }
      }
    }
    Map<String, String> routeTags = new LinkedHashMap<>();
    JsonNode t = body.path("routeTags");
    if (!t.isMissingNode() && !t.isNull()) {
      if (!t.isObject()) {
        throw ApiError.badRequest("routeTags", "must be an object of tag to value");
      }
      if (t.size() > MAX_ROUTE_TAGS) {
        throw ApiError.badRequest("routeTags", "at most " + MAX_ROUTE_TAGS + " tags");
      }
      for (Map.Entry<String, JsonNode> e : t.properties()) {
        String at = "routeTags." + Visible.text(e.getKey(), 64);
        if (!e.getValue().isTextual()) {
          throw ApiError.badRequest(at, "must be a string");
        }
        if (e.getKey().isEmpty()
            || e.getKey().length() > MAX_TAG_CHARS
            || e.getValue().textValue().length() > MAX_TAG_CHARS) {
          throw ApiError.badRequest(
              at, "a tag's key and value are 1 to " + MAX_TAG_CHARS + " characters");
        }
        routeTags.put(e.getKey(), e.getValue().textValue());
      }
      if (routes.stream().noneMatch(route -> Access.covers(routeTags, route.tags()))) {
        throw new ApiError(
            400,
            "routeTags: select no configured route",
            "a route is selected when its tags hold all of these",
            "routeTags");
      }
    }
    if (names.isEmpty() && routeTags.isEmpty()) {
      throw ApiError.badRequest(
          "routes",
          "a token covers some routes: give routes (names, or '*' for every route) or routeTags");
    }
    Instant expires = expiry(body);
    store
        .tokens()
        .create(name, owner, role, names, routeTags, expires)
        .compose(
            c -> {
              log.info(
                  "Token {} created: {} of routes {} {}.",
                  name,
                  c.token().role().wire(),
                  names,
                  routeTags);
              return access
                  .audit(
                      AuditStore.Entry.of(Access.caller(ctx).name(), "token-create", null, null)
                          .withDetail(
                              Json.MAPPER.valueToTree(
                                  Map.of(
                                      "token", name,
                                      "role", role.wire(),
                                      "routes", names,
                                      "routeTags", routeTags))))
                  .map(c);
            })
        .onSuccess(
            c -> {
              Map<String, Object> out = view(c.token());
              out.put("token", c.secret());
              json(ctx, 201, out);
            })
        .onFailure(
            e -> {
              if (e instanceof TokenStore.NameTakenException) {
                fail(
                    ctx,
                    new ApiError(
                        409, "name: " + e.getMessage(), "revoke it, or choose another", "name"));
              } else {
                ctx.fail(e);
              }
            });
  }

  private static Role role(String text) {
    try {
      return text == null ? null : Role.ofWire(text);
    } catch (IllegalArgumentException e) {
      return null;
    }
  }

  /** {@code expiresIn} (a duration, like 30d) or {@code expiresAt} (RFC 3339); null: never. */
  private static Instant expiry(JsonNode body) {
    String in = Http.textOrNull(body, "expiresIn");
    String at = Http.textOrNull(body, "expiresAt");
    if (in != null && at != null) {
      throw ApiError.badRequest("expiresAt", "give expiresIn or expiresAt, not both");
    }
    if (in != null) {
      Duration d;
      try {
        d = Units.parseDuration(in);
      } catch (IllegalArgumentException e) {
        throw ApiError.badRequest("expiresIn", "'" + in + "' is not a duration, like 12h or 90d");
      }
      if (d.isZero() || d.isNegative()) {
        throw ApiError.badRequest("expiresIn", "must be longer than 0");
      }
      if (d.compareTo(MAX_LIFETIME) > 0) {
        throw ApiError.badRequest("expiresIn", "at most 36500d (100 years)");
      }
      return Instant.now().plus(d);
    }
    if (at != null) {
      try {
        Instant i = Instant.parse(at);
        if (!i.isAfter(Instant.now())) {
          throw ApiError.badRequest("expiresAt", "is in the past: " + at);
        }
        if (i.isAfter(Instant.now().plus(MAX_LIFETIME))) {
          throw ApiError.badRequest("expiresAt", "at most 100 years from now");
        }
        return i;
      } catch (DateTimeParseException e) {
        throw ApiError.badRequest("expiresAt", "'" + at + "' is not an RFC 3339 time");
      }
    }
    return null;
  }

  private Map<String, Object> view(TokenStore.Token t) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("name", t.name());
    out.put("owner", t.owner());
    out.put("role", t.role().wire());
    out.put("routes", t.routes());
    out.put("routeTags", t.routeTags());
    Caller c = access.caller(t);
    out.put("covers", c.routes() == null ? List.of("*") : c.routes().stream().sorted().toList());
    out.put("createdAt", t.createdAt());
    out.put("expiresAt", t.expiresAt());
    out.put("revokedAt", t.revokedAt());
    out.put("lastUsedAt", t.lastUsedAt());
    out.put(
        "status",
        t.revokedAt() != null
            ? "revoked"
            : t.expiresAt() != null && !t.expiresAt().isAfter(Instant.now())
                ? "expired"
                : "active");
    return out;
  }

  private void list(RoutingContext ctx) {
    requireAdmin(ctx, "listing tokens");
    store
        .tokens()
        .list()
        .onSuccess(l -> json(ctx, 200, Map.of("tokens", l.stream().map(this::view).toList())))
        .onFailure(ctx::fail);
  }

  private void revoke(RoutingContext ctx) {
    Http.emptyBody(ctx);
    requireAdmin(ctx, "revoking a token");
    String name = ctx.pathParam("name");
    store
        .tokens()
        .revoke(name)
        .compose(
            r -> {
              if (r.isEmpty() || !r.get().now()) {
                return io.vertx.core.Future.succeededFuture(r);
              }
              log.info("Token {} revoked.", name);
              return access
                  .audit(
                      AuditStore.Entry.of(Access.caller(ctx).name(), "token-revoke", null, null)
                          .withDetail(Json.MAPPER.createObjectNode().put("token", name)))
                  .map(r);
            })
        .onSuccess(
            r -> {
              if (r.isEmpty()) {
                fail(ctx, ApiError.notFound("token " + name));
              } else {
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("name", name);
                out.put("revokedAt", r.get().at());
                out.put("already", !r.get().now());
                json(ctx, 200, out);
              }
            })
        .onFailure(ctx::fail);
  }

  private void audit(RoutingContext ctx) {
    requireAdmin(ctx, "reading the audit trail");
    store
        .audit()
        .list(
            emptyToNull(Http.queryText(ctx, "actor")),
            emptyToNull(Http.queryText(ctx, "action")),
            longParam(ctx, "build"),
            emptyToNull(Http.queryText(ctx, "outcome")),
            longParam(ctx, "before"),
            intParam(ctx, "limit", 100, 1, 1000))
        .onSuccess(l -> json(ctx, 200, Map.of("entries", l)))
        .onFailure(ctx::fail);
  }
}
