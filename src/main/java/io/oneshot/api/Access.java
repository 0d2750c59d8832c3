package io.oneshot.api;

import io.oneshot.build.AuditStore;
import io.oneshot.build.TokenStore;
import io.oneshot.build.TokenStore.Role;
import io.oneshot.config.OneshotConfig;
import io.vertx.core.Handler;
import io.vertx.ext.web.RoutingContext;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Who may call what. The admin token may do everything; an API token ({@link TokenStore}) may do
 * what its role allows on the routes it covers. A build or workspace outside a token's routes is
 * answered as if it did not exist (404), so that names do not leak; a role too narrow for a call is
 * a 403. Every refusal counts in {@code oneshot_api_refused_total{reason}}.
 */
final class Access {
  private static final Logger log = LoggerFactory.getLogger(Access.class);
  private static final String KEY = "oneshot.caller";

  private final byte[] adminToken;
  private final TokenStore tokens;
  private final AuditStore audit;
  private final List<OneshotConfig.Route> routes;
  private final Metrics metrics;

  Access(
      String adminToken,
      TokenStore tokens,
      AuditStore audit,
      List<OneshotConfig.Route> routes,
      Metrics metrics) {
    this.adminToken = adminToken.getBytes(StandardCharsets.UTF_8);
    this.tokens = tokens;
    this.audit = audit;
    this.routes = routes;
    this.metrics = metrics;
  }

  /** Lets a request through with the admin token or a live API token, noting its {@link Caller}. */
  Handler<RoutingContext> authenticate() {
    return ctx -> {
      String given = Http.bearer(ctx);
      if (given == null || given.isEmpty()) {
        throw refused("no_token", "missing Authorization: Bearer <token>");
      }
      if (MessageDigest.isEqual(given.getBytes(StandardCharsets.UTF_8), adminToken)) {
        ctx.put(KEY, Caller.ADMIN);
        ctx.next();
        return;
      }
      if (!given.startsWith(TokenStore.PREFIX)) {
        throw refused("bad_token", "the token is wrong");
      }
      tokens
          .lookup(given)
          .onSuccess(
              found -> {
                if (found.isEmpty()) {
                  ctx.fail(refused("bad_token", "the token is wrong"));
                } else if (found.get().token().revokedAt() != null) {
                  ctx.fail(
                      refused(
                          "revoked_token", "token " + found.get().token().name() + " was revoked"));
                } else if (found.get().expired()) {
                  ctx.fail(
                      refused(
                          "expired_token",
                          "token "
                              + found.get().token().name()
                              + " expired at "
                              + Json.TIME.format(found.get().token().expiresAt())));
                } else {
                  ctx.put(KEY, caller(found.get().token()));
                  ctx.next();
                }
              })
          .onFailure(ctx::fail);
    };
  }

  /** The caller {@link #authenticate} let through. */
  static Caller caller(RoutingContext ctx) {
    Caller c = ctx.get(KEY);
    if (c == null) {
      throw new IllegalStateException("no caller: the route is not behind authenticate()");
    }
    return c;
  }

  /** A token's caller, with the configured routes it covers by name or by tags. */
  Caller caller(TokenStore.Token t) {
    if (t.routes().contains("*")) {
      return new Caller(t.name(), t.id(), t.role(), null);
    }
    Set<String> covered = new TreeSet<>();
    for (OneshotConfig.Route r : routes) {
      if (t.routes().contains(r.name()) || covers(t.routeTags(), r.tags())) {
        covered.add(r.name());
      }
    }
    return new Caller(t.name(), t.id(), t.role(), Set.copyOf(covered));
  }

  /**
   * What a build's tags must match, for a token that covers some routes: those routes and their
   * tags, and none of the others.
   */
  String routesHint(Caller c) {
    List<String> own = new java.util.ArrayList<>();
    for (OneshotConfig.Route r : routes) {
      if (c.covers(r.name())) {
        // Tags in key order: a route's map has none of its own.
        own.add(
            r.name()
                + " "
                + Json.write(new java.util.TreeMap<>(r.tags()))
                + (r.untagged() ? " (and untagged)" : ""));
      }
    }
    return own.isEmpty()
        ? "token " + c.name() + " covers no configured route"
        : "a route matches when its tags contain all of the build's tags; the routes of token "
            + c.name()
            + ": "
            + String.join(", ", own);
  }

  static boolean covers(Map<String, String> wanted, Map<String, String> routeTags) {
    return !wanted.isEmpty() && routeTags.entrySet().containsAll(wanted.entrySet());
  }

  /** Refuses a caller whose role is narrower than {@code needed} for {@code what}: a 403. */
  ApiError role(RoutingContext ctx, Role needed, String what) {
    Caller c = caller(ctx);
    metrics.refused("role");
    log.info(
        "Refused {} to token {} (role {}): needs {}.", what, c.name(), c.roleName(), needed.wire());
    return new ApiError(
        403,
        "forbidden: token "
            + c.name()
            + " is a "
            + c.roleName()
            + "; "
            + what
            + " needs "
            + needed.wire(),
        "ask for a token with that role (oneshot tokens create --role " + needed.wire() + ")",
        null);
  }

  /** Refuses a call that needs the admin token. */
  ApiError adminOnly(RoutingContext ctx, String what) {
    Caller c = caller(ctx);
    metrics.refused("role");
    return new ApiError(
        403,
        "forbidden: "
            + what
            + " needs the admin token; token "
            + c.name()
            + " is a "
            + c.roleName(),
        null,
        null);
  }

  /** A thing outside the caller's routes, answered as one that does not exist. */
  ApiError outOfScope(String what) {
    metrics.refused("out_of_scope");
    return ApiError.notFound(what);
  }

  /** Counts a refusal that is answered some other way (a submit outside the token's routes). */
  void countRefused(String reason) {
    metrics.refused(reason);
  }

  /**
   * Appends an audit entry (for what is not recorded in its own transaction); the future never
   * fails: a failure to write is logged, and the caller answers once it is done either way.
   */
  io.vertx.core.Future<Void> audit(AuditStore.Entry e) {
    return audit
        .append(e)
        .recover(
            x -> {
              log.error("Could not append to the audit trail: {}: {}.", e, x.getMessage());
              return io.vertx.core.Future.succeededFuture();
            });
  }

  /**
   * Appends a refusal of {@code action} to the audit trail and fails {@code ctx} with {@code e}.
   */
  void refuseAudited(RoutingContext ctx, AuditStore.Entry entry, ApiError e) {
    String outcome = e.status() == 404 ? "out_of_scope" : "role";
    audit(entry.withOutcome(outcome)).onComplete(x -> Http.fail(ctx, e));
  }

  private ApiError refused(String reason, String detail) {
    metrics.refused(reason);
    return Http.unauthorized(detail);
  }
}
