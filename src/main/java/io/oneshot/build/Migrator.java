package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.SqlConnection;
import io.vertx.sqlclient.Tuple;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Applies the numbered migrations in {@code src/main/resources/db/} in order, each in its own
 * transaction, under an advisory lock so that concurrent starters wait for each other instead of
 * racing. Each applied migration's SHA-256 is recorded; a migration whose file changed after it was
 * applied stops the start, since the database no longer matches what the file says.
 */
public final class Migrator {
  private static final Logger log = LoggerFactory.getLogger(Migrator.class);

  /** Every migration, in order. A test checks this list against the files in {@code db/}. */
  public static final List<String> MIGRATIONS =
      List.of(
          "001_queue.sql",
          "002_workspace_state.sql",
          "003_launch_pod.sql",
          "004_route_waits.sql",
          "005_runner.sql",
          "006_untagged_rerun_retention.sql",
          "007_sources.sql",
          "008_access.sql",
          "009_wakes.sql",
          "010_fenced_out.sql",
          "011_transition_triggers.sql",
          "012_history_without_foreign_keys.sql",
          "013_statement_events.sql",
          "014_launch_records.sql",
          "015_launch_removed.sql",
          "016_workspaces_by_route.sql",
          "017_warm_capacity.sql",
          "018_pod_settings.sql",
          "019_fair_share.sql",
          "020_key_checks.sql",
          "021_pulumi.sql",
          "022_clusters.sql");

  /** What a run did: the schema version before and after, and the migrations it applied. */
  public record Result(int from, int to, List<String> applied) {}

  private Migrator() {}

  public static Result migrate(Database db) {
    return migrate(db, MIGRATIONS.size());
  }

  /** Applies the migrations up to version {@code upTo} only (tests of an upgrade). */
  static Result migrate(Database db, int upTo) {
    SqlConnection conn = Database.await(db.pool().getConnection());
    try {
      Database.await(
          conn.preparedQuery("SELECT pg_advisory_lock($1, $2)")
              .execute(Tuple.of(AdvisoryLocks.CLASS, AdvisoryLocks.MIGRATE)));
      try {
        return applyPending(conn, upTo);
      } finally {
        Database.await(conn.query("RESET client_min_messages").execute());
        Database.await(
            conn.preparedQuery("SELECT pg_advisory_unlock($1, $2)")
                .execute(Tuple.of(AdvisoryLocks.CLASS, AdvisoryLocks.MIGRATE)));
      }
    } finally {
      Database.await(conn.close());
    }
  }

  private static Result applyPending(SqlConnection conn, int upTo) {
    Database.await(
        conn.query(
                """
                SET client_min_messages = warning;
                CREATE SCHEMA IF NOT EXISTS oneshot;
                CREATE TABLE IF NOT EXISTS oneshot.schema_migrations (
                  version    int PRIMARY KEY,
                  name       text NOT NULL,
                  applied_at timestamptz NOT NULL DEFAULT now()
                );
                ALTER TABLE oneshot.schema_migrations ADD COLUMN IF NOT EXISTS checksum text""")
            .execute());
    Set<Integer> applied = new HashSet<>();
    for (Row row :
        Database.await(
            conn.query("SELECT version, name, checksum FROM oneshot.schema_migrations")
                .execute())) {
      int version = row.getInteger("version");
      applied.add(version);
      if (version <= MIGRATIONS.size()) {
        verify(conn, version, row.getString("name"), row.getString("checksum"));
      }
    }
    int known = MIGRATIONS.size();
    int newest = applied.stream().mapToInt(Integer::intValue).max().orElse(0);
    if (newest > known) {
      throw new IllegalStateException(
          "the database schema is at version "
              + newest
              + " but this oneshot knows versions up to "
              + known
              + "; run a newer oneshot against this database");
    }
    List<String> done = new ArrayList<>();
    for (int i = 0; i < upTo; i++) {
      int version = i + 1;
      if (applied.contains(version)) {
        continue;
      }
      String name = MIGRATIONS.get(i);
      String sql = read(name);
      Database.await(
          conn.begin()
              .compose(
                  tx ->
                      conn.query(sql)
                          .execute()
                          .compose(
                              r ->
                                  conn.preparedQuery(
                                          "INSERT INTO oneshot.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)")
                                      .execute(Tuple.of(version, name, checksum(sql))))
                          .compose(r -> tx.commit())
                          .recover(e -> tx.rollback().compose(v -> Future.failedFuture(e)))));
      log.info("Applied migration {} ({}).", version, name);
      done.add(name);
    }
    return new Result(newest, upTo, done);
  }

  /**
   * Checks an applied migration against its file: the same name, and the same checksum. One applied
   * before checksums were kept gets the file's now.
   */
  private static void verify(SqlConnection conn, int version, String name, String recorded) {
    String file = MIGRATIONS.get(version - 1);
    String now = checksum(read(file));
    if (!file.equals(name)) {
      throw new IllegalStateException(
          "migration "
              + version
              + " was applied to this database as "
              + name
              + " but this oneshot has "
              + file
              + " in its place; migrations are never renamed or reordered once applied");
    }
    if (recorded == null) {
      Database.await(
          conn.preparedQuery(
                  "UPDATE oneshot.schema_migrations SET checksum = $2 WHERE version = $1"
                      + " AND checksum IS NULL")
              .execute(Tuple.of(version, now)));
      return;
    }
    if (!recorded.equals(now)) {
      throw new IllegalStateException(
          "migration "
              + version
              + " ("
              + file
              + ") changed after it was applied to this database (SHA-256 "
              + recorded.substring(0, 12)
              + "… then, "
              + now.substring(0, 12)
              + "… now): the schema may not be what the file says. Run the oneshot version that"
              + " applied it, or restore the file; a change to the schema goes in a new migration");
    }
  }

  /** SHA-256 of a migration's text, with its line endings as LF (a checkout's CRLF is the same). */
  static String checksum(String sql) {
    try {
      byte[] digest =
          MessageDigest.getInstance("SHA-256")
              .digest(sql.replace("\r\n", "\n").getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(digest);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String read(String name) {
    try (InputStream in = Migrator.class.getResourceAsStream("/db/" + name)) {
      if (in == null) {
        throw new IllegalStateException("migration db/" + name + " is missing from the jar");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
