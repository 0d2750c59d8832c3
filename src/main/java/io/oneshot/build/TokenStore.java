package io.oneshot.build;

import io.oneshot.api.Json;
import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.pgclient.PgException;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.Tuple;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * API tokens besides the admin token: each has a name, a role and the routes it covers, and is
 * stored as its SHA-256 alone (the token is shown once, when it is created).
 */
public final class TokenStore {
  private static final Sql CREATE = Sql.load("tokens/create");
  private static final Sql LIST = Sql.load("tokens/list");
  private static final Sql REVOKE = Sql.load("tokens/revoke");
  private static final Sql LOOKUP = Sql.load("tokens/lookup");

  /** Tokens start so, which tells them from the admin token and build tokens in a leaked text. */
  public static final String PREFIX = "oneshot_";

  private static final SecureRandom RANDOM = new SecureRandom();

  private final Pool pool;

  TokenStore(Pool pool) {
    this.pool = pool;
  }

  /** What a token may do, widening: each role may do all that the one before it may. */
  public enum Role {
    /** Reads builds, logs and routes of its routes. */
    VIEWER,
    /** Also submits builds to its routes, and cancels and reruns the builds it submitted. */
    SUBMITTER,
    /** Also cancels and reruns every build of its routes, and reads their workspaces' state. */
    OPERATOR;

    public String wire() {
      return name().toLowerCase(Locale.ROOT);
    }

    public static Role ofWire(String s) {
      return valueOf(s.toUpperCase(Locale.ROOT));
    }

    public boolean atLeast(Role other) {
      return compareTo(other) >= 0;
    }
  }

  /**
   * A token as stored. {@code routes}: route names it covers ({@code *}: all); {@code routeTags}:
   * it also covers every route whose tags include these.
   */
  public record Token(
      long id,
      String name,
      String owner,
      Role role,
      List<String> routes,
      Map<String, String> routeTags,
      Instant createdAt,
      Instant expiresAt,
      Instant revokedAt,
      Instant lastUsedAt) {}

  /** A token just made: the only time its secret is known. */
  public record Created(Token token, String secret) {}

  /** A token name is taken. */
  public static final class NameTakenException extends RuntimeException {
    NameTakenException(String name) {
      super("a token named " + name + " exists already");
    }
  }

  public Future<Created> create(
      String name,
      String owner,
      Role role,
      List<String> routes,
      Map<String, String> routeTags,
      Instant expiresAt) {
    byte[] raw = new byte[32];
    RANDOM.nextBytes(raw);
    String secret = PREFIX + Base64.getUrlEncoder().withoutPadding().encodeToString(raw);
    return pool.preparedQuery(CREATE.text())
        .execute(
            Tuple.tuple()
                .addString(name)
                .addString(owner == null ? "" : owner)
                .addString(role.wire())
                .addArrayOfString(routes.toArray(String[]::new))
                .addString(Json.write(routeTags))
                .addOffsetDateTime(
                    expiresAt == null ? null : OffsetDateTime.ofInstant(expiresAt, ZoneOffset.UTC))
                .addBuffer(Buffer.buffer(hash(secret))))
        .map(rows -> new Created(token(rows.iterator().next()), secret))
        .recover(
            e ->
                Future.failedFuture(
                    e instanceof PgException pg && "23505".equals(pg.getSqlState())
                        ? new NameTakenException(name)
                        : e));
  }

  public Future<List<Token>> list() {
    return pool.preparedQuery(LIST.text())
        .execute()
        .map(
            rows -> {
              List<Token> out = new ArrayList<>(rows.rowCount());
              rows.forEach(r -> out.add(token(r)));
              return out;
            });
  }

  /** What a revoke found: when the token was revoked, and whether this call did it. */
  public record Revoked(Instant at, boolean now) {}

  /** Empty: no token has that name. */
  public Future<Optional<Revoked>> revoke(String name) {
    return pool.preparedQuery(REVOKE.text())
        .execute(Tuple.of(name))
        .map(
            rows ->
                rows.rowCount() == 0
                    ? Optional.empty()
                    : Optional.of(
                        new Revoked(
                            Rows.instant(rows.iterator().next(), "revoked_at"),
                            rows.iterator().next().getBoolean("revoked_now"))));
  }

  /** A token looked up by its secret, and whether it has expired. */
  public record Found(Token token, boolean expired) {}

  /** Empty: no token has this secret. */
  public Future<Optional<Found>> lookup(String secret) {
    return pool.preparedQuery(LOOKUP.text())
        .execute(Tuple.of(Buffer.buffer(hash(secret))))
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return Optional.empty();
              }
              Row r = rows.iterator().next();
              return Optional.of(new Found(token(r), r.getBoolean("expired")));
            });
  }

  private static Token token(Row r) {
    String[] routes = r.getArrayOfStrings("routes");
    return new Token(
        r.getLong("id"),
        r.getString("name"),
        r.getString("owner"),
        Role.ofWire(r.getString("role")),
        routes == null ? List.of() : Arrays.asList(routes),
        Rows.stringMap(r.getString("route_tags")),
        Rows.instant(r, "created_at"),
        Rows.instant(r, "expires_at"),
        Rows.instant(r, "revoked_at"),
        Rows.instant(r, "last_used_at"));
  }

  static byte[] hash(String secret) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(secret.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
