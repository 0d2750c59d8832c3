package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One SQL statement, read from its own file under {@code src/main/resources/io/oneshot/build/sql/}
 * ({@code queue/claim} is {@code sql/queue/claim.sql}), so that a query reads as SQL and its diff
 * is a diff of one file. Each file starts with a comment saying which transition it performs and
 * which compare-and-set guards it.
 *
 * <p>Stores load their statements into static fields, so a missing file fails as the store is
 * created, at start; {@link #checkAll} then has the database parse every loaded statement, so that
 * one that does not parse (or names a column the schema lacks) also fails at start, not at first
 * use. A statement may hold {@code {{name}}} placeholders for constants the planner must see (a
 * batch size); {@link #with} fills them in.
 */
public final class Sql {
  private static final Pattern PLACEHOLDER = Pattern.compile("\\{\\{([a-z]+)}}");
  private static final Map<String, Sql> LOADED = new ConcurrentHashMap<>();

  private final String name;
  private final String text;
  private final boolean placeholders;

  private Sql(String name, String text) {
    this.name = name;
    this.text = text;
    this.placeholders = PLACEHOLDER.matcher(text).find();
  }

  /** Reads {@code sql/<name>.sql} next to this class, once. */
  public static Sql load(String name) {
    return LOADED.computeIfAbsent(name, Sql::read);
  }

  /** Reads {@code sql/<name>.sql} without registering it for {@link #checkAll}. */
  static Sql read(String name) {
    String path = "sql/" + name + ".sql";
    try (InputStream in = Sql.class.getResourceAsStream(path)) {
      if (in == null) {
        throw new IllegalStateException(
            "SQL statement "
                + name
                + " is missing: no io/oneshot/build/"
                + path
                + " on the class path (a broken build?)");
      }
      String text = new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
      if (text.isEmpty()) {
        throw new IllegalStateException("SQL statement " + name + " is empty (" + path + ")");
      }
      return new Sql(name, text);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read SQL statement " + name, e);
    }
  }

  public String name() {
    return name;
  }

  /** The statement; fails when it has placeholders (use {@link #with}). */
  public String text() {
    if (placeholders) {
      throw new IllegalStateException(
          "SQL statement " + name + " has placeholders; fill them in with with()");
    }
    return text;
  }

  /**
   * The statement with each {@code {{key}}} replaced by its value. The texts made are kept (up to
   * {@link #FILLED_KEPT} a statement): the claim fills in its batch size on every call.
   */
  public String with(Map<String, Object> values) {
    String done = filled.get(values);
    if (done != null) {
      return done;
    }
    done = fill(values);
    if (filled.size() < FILLED_KEPT) {
      filled.put(Map.copyOf(values), done);
    }
    return done;
  }

  /** How many filled-in texts a statement keeps: as many as the client prepares a connection. */
  static final int FILLED_KEPT = 128;

  private final Map<Map<String, Object>, String> filled = new ConcurrentHashMap<>();

  private String fill(Map<String, Object> values) {
    Matcher m = PLACEHOLDER.matcher(text);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      Object v = values.get(m.group(1));
      if (v == null) {
        throw new IllegalArgumentException(
            "SQL statement " + name + " needs a value for {{" + m.group(1) + "}}");
      }
      m.appendReplacement(out, Matcher.quoteReplacement(v.toString()));
    }
    m.appendTail(out);
    return out.toString();
  }

  /** Every statement loaded so far, by name. */
  public static List<Sql> loaded() {
    List<Sql> all = new ArrayList<>(LOADED.values());
    all.sort((a, b) -> a.name.compareTo(b.name));
    return all;
  }

  /**
   * Has the database parse and plan every loaded statement without running it (placeholders filled
   * with 1). Fails with the first statement that does not parse, by name.
   */
  public static Future<Void> checkAll(Pool pool) {
    return check(pool, loaded());
  }

  /** {@link #checkAll} for the given statements; the failure names every one that fails. */
  static Future<Void> check(Pool pool, List<Sql> statements) {
    return pool.withConnection(
        conn -> {
          List<String> failures = new ArrayList<>();
          Future<Void> f = Future.succeededFuture();
          for (Sql s : statements) {
            String text = PLACEHOLDER.matcher(s.text).replaceAll("1");
            f =
                f.compose(
                    x ->
                        conn.prepare(text)
                            .compose(ps -> ps.close())
                            .otherwise(
                                e -> {
                                  failures.add(
                                      "SQL statement "
                                          + s.name
                                          + " (io/oneshot/build/sql/"
                                          + s.name
                                          + ".sql) does not parse: "
                                          + e.getMessage());
                                  return null;
                                }));
          }
          return f.compose(
              x ->
                  failures.isEmpty()
                      ? Future.succeededFuture()
                      : Future.failedFuture(
                          new IllegalStateException(String.join("; ", failures))));
        });
  }

  @Override
  public String toString() {
    return name;
  }
}
