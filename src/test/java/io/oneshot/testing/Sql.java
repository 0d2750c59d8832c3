package io.oneshot.testing;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Plain JDBC against the test database: what tests use to look behind the API. */
public final class Sql {
  private Sql() {}

  public static Connection connect() {
    try {
      return DriverManager.getConnection(TestDatabase.jdbcUrl());
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  public static List<Map<String, Object>> rows(String sql, Object... params) {
    try (Connection c = connect()) {
      return rows(c, sql, params);
    } catch (SQLException e) {
      throw new IllegalStateException(sql + ": " + e.getMessage(), e);
    }
  }

  public static List<Map<String, Object>> rows(Connection c, String sql, Object... params)
      throws SQLException {
    try (PreparedStatement st = c.prepareStatement(sql)) {
      for (int i = 0; i < params.length; i++) {
        st.setObject(i + 1, params[i]);
      }
      if (!st.execute()) {
        return List.of();
      }
      try (ResultSet rs = st.getResultSet()) {
        ResultSetMetaData md = rs.getMetaData();
        List<Map<String, Object>> out = new ArrayList<>();
        while (rs.next()) {
          Map<String, Object> row = new LinkedHashMap<>();
          for (int i = 1; i <= md.getColumnCount(); i++) {
            row.put(md.getColumnLabel(i), rs.getObject(i));
          }
          out.add(row);
        }
        return out;
      }
    }
  }

  /** The single value of a one-row, one-column query. */
  public static Object value(String sql, Object... params) {
    List<Map<String, Object>> r = rows(sql, params);
    if (r.size() != 1) {
      throw new IllegalStateException(sql + ": expected one row, got " + r.size());
    }
    return r.get(0).values().iterator().next();
  }

  public static long count(String sql, Object... params) {
    return ((Number) value(sql, params)).longValue();
  }

  /**
   * Empties the builds and what hangs off them (ids keep counting), while the server of the test
   * class may still be writing what an earlier test left: see {@link #execBesideTheServer}.
   */
  public static void emptyBuilds() {
    execBesideTheServer(TRUNCATE_BUILDS);
  }

  /** The builds and every table that refers to them, in one TRUNCATE. */
  private static final String TRUNCATE_BUILDS =
      "TRUNCATE oneshot.workspace_states, oneshot.build_logs, oneshot.build_events,"
          + " oneshot.build_launches, oneshot.builds, oneshot.route_warmth, oneshot.balloon_usage";

  /**
   * Runs {@code sql} again when PostgreSQL chose it as a deadlock's victim. A TRUNCATE of several
   * tables locks them one after the other, and a server still recording an earlier test's build
   * (its transaction holding one table, wanting the next) can close the circle.
   */
  private static void execBesideTheServer(String sql) {
    for (int attempt = 1; ; attempt++) {
      try {
        exec(sql);
        return;
      } catch (IllegalStateException e) {
        boolean deadlock =
            e.getCause() instanceof SQLException s && "40P01".equals(s.getSQLState());
        if (!deadlock || attempt == 5) {
          throw e;
        }
      }
    }
  }

  public static void exec(String sql, Object... params) {
    try (Connection c = connect();
        PreparedStatement st = c.prepareStatement(sql)) {
      for (int i = 0; i < params.length; i++) {
        st.setObject(i + 1, params[i]);
      }
      st.execute();
    } catch (SQLException e) {
      throw new IllegalStateException(sql + ": " + e.getMessage(), e);
    }
  }

  /**
   * Where {@code text} appears in the database, as a dump would show it: every row of every table
   * of the oneshot schema, whole, as text ({@code table: count}; empty when it appears nowhere).
   */
  public static Map<String, Long> dumpSearch(String text) {
    Map<String, Long> out = new java.util.TreeMap<>();
    for (Map<String, Object> t :
        rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'oneshot'"
                + " AND table_type = 'BASE TABLE'")) {
      String table = (String) t.get("table_name");
      long n =
          count("SELECT count(*) FROM oneshot." + table + " x WHERE strpos(x::text, ?) > 0", text);
      if (n > 0) {
        out.put(table, n);
      }
    }
    return out;
  }

  /**
   * Every table of the oneshot schema as a digest of its rows, and every sequence's last value:
   * equal before and after a request that must write nothing.
   */
  public static Map<String, Object> digest() {
    List<String> parts = new java.util.ArrayList<>();
    for (Map<String, Object> t :
        rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'oneshot'"
                + " AND table_type = 'BASE TABLE'")) {
      String table = (String) t.get("table_name");
      parts.add(
          "SELECT '"
              + table
              + "' AS what, count(*) || ':' || coalesce(md5(string_agg(x::text, '|' ORDER BY"
              + " x::text)), '') AS digest FROM oneshot."
              + table
              + " x");
    }
    parts.add(
        "SELECT 'sequence ' || sequencename, coalesce(last_value::text, '-') FROM pg_sequences"
            + " WHERE schemaname = 'oneshot'");
    Map<String, Object> out = new java.util.TreeMap<>();
    for (Map<String, Object> r : rows(String.join(" UNION ALL ", parts))) {
      out.put((String) r.get("what"), r.get("digest"));
    }
    return out;
  }

  /** Empties the queue between tests; the schema stays. */
  public static void reset() {
    execBesideTheServer(
        TRUNCATE_BUILDS
            + " RESTART IDENTITY;"
            + " DELETE FROM oneshot.routes; DELETE FROM oneshot.teams; DELETE FROM oneshot.api_tokens;"
            // Each test's keys are its own: a key of another secret under the same id is no
            // change of key here.
            + " DELETE FROM oneshot.key_checks;"
            // The audit trail refuses deletes: a reset (tests only) sets its guard aside.
            + " ALTER TABLE oneshot.audit DISABLE TRIGGER audit_append_only;"
            + " TRUNCATE oneshot.audit RESTART IDENTITY;"
            + " ALTER TABLE oneshot.audit ENABLE TRIGGER audit_append_only;");
  }

  /**
   * Whether another connection is running, or last ran, a statement whose text contains {@code
   * text} (a statement file's first comment names it): proof that a call was sent.
   */
  public static boolean ranElsewhere(String text) {
    return count(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                + " AND query LIKE '%' || ? || '%'",
            text)
        > 0;
  }

  /** Whether the launch of the build's current attempt has been recorded. */
  public static boolean launchRecorded(long id) {
    return count(
            "SELECT count(*) FROM oneshot.builds b JOIN oneshot.build_launches l"
                + " ON l.build_id = b.id AND l.attempt = b.attempt WHERE b.id = ?",
            id)
        == 1;
  }

  /** The texts of a build's log lines of one stream (stdout, stderr, system), in order. */
  public static List<String> logLines(long id, String stream) {
    return rows(
            "SELECT text FROM oneshot.build_logs WHERE build_id = ? AND stream = ? ORDER BY seq",
            id,
            stream)
        .stream()
        .map(r -> (String) r.get("text"))
        .toList();
  }

  /** {@code bytes} as a bytea literal, for SQL written out in full (EXPLAIN EXECUTE ...). */
  public static String bytea(byte[] bytes) {
    return "'\\x" + java.util.HexFormat.of().formatHex(bytes) + "'::bytea";
  }

  /** A build's status changes in order, as "from>to" (the enqueue and milestones left out). */
  public static List<String> transitions(long id) {
    return rows(
            "SELECT from_status || '>' || to_status AS t FROM oneshot.build_events"
                + " WHERE build_id = ? AND from_status <> to_status ORDER BY id",
            id)
        .stream()
        .map(r -> (String) r.get("t"))
        .toList();
  }
}
