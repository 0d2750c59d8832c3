package io.oneshot.bench;

import io.oneshot.build.Database;
import io.oneshot.testing.TestDatabase;
import io.vertx.core.Vertx;
import io.vertx.pgclient.PgConnectOptions;
import io.vertx.pgclient.PgConnection;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowSet;

/**
 * A bare queue for a scenario's floor or ceiling: a table of rows with a {@code claimed} flag,
 * found as the queue's pending builds are (by a partial index of the unclaimed), reached through
 * the dispatcher's client (Vert.x's) on the benchmark's database, and dropped on close.
 */
final class BareTable implements AutoCloseable {
  private final Vertx vertx = Vertx.vertx();
  private final PgConnectOptions options;
  private final String name;

  /** The first connection, on which the table was made and is dropped. */
  final PgConnection connection;

  /** Makes {@code public.<name>}; {@code application} names the connections in pg_stat_activity. */
  BareTable(String name, String application) {
    this.name = name;
    this.options = Database.optionsFor(TestDatabase.url(), application);
    try {
      connection = connect();
      run(
          connection,
          "CREATE TABLE IF NOT EXISTS "
              + table()
              + " (id bigserial PRIMARY KEY, claimed boolean NOT NULL DEFAULT false)");
      run(
          connection,
          "CREATE INDEX IF NOT EXISTS "
              + name
              + "_pending ON "
              + table()
              + " (id) WHERE NOT claimed");
    } catch (RuntimeException e) {
      Database.await(vertx.close());
      throw e;
    }
  }

  /** The table's qualified name, for the statements run on it. */
  String table() {
    return "public." + name;
  }

  /** Another connection to the same database, closed with the rest. */
  PgConnection connect() {
    return Database.await(PgConnection.connect(vertx, options));
  }

  static RowSet<Row> run(PgConnection c, String sql) {
    return Database.await(c.query(sql).execute());
  }

  @Override
  public void close() {
    try {
      run(connection, "DROP TABLE " + table());
    } finally {
      Database.await(vertx.close());
    }
  }
}
