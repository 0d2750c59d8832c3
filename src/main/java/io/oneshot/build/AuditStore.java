package io.oneshot.build;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.SqlClient;
import io.vertx.sqlclient.Tuple;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * The audit trail: who (a token's name, or {@code admin}) submitted, canceled, reran, read the
 * state of, or was refused what, and when. Append-only: the table refuses updates and deletes.
 */
public final class AuditStore {
  private static final Sql APPEND = Sql.load("audit/append");
  private static final Sql LIST = Sql.load("audit/list");

  private final Pool pool;

  AuditStore(Pool pool) {
    this.pool = pool;
  }

  /**
   * One entry. {@code outcome}: {@code ok}, or why it was refused; {@code detail}: what else is
   * worth keeping (a state version, a token's role), or null.
   */
  public record Entry(
      Long id,
      Instant at,
      String actor,
      String action,
      String outcome,
      Long buildId,
      String route,
      String workspace,
      JsonNode detail) {
    public static Entry of(String actor, String action, Long buildId, String route) {
      return new Entry(null, null, actor, action, "ok", buildId, route, null, null);
    }

    public Entry withWorkspace(String workspace) {
      return new Entry(id, at, actor, action, outcome, buildId, route, workspace, detail);
    }

    public Entry withRoute(String route) {
      return new Entry(id, at, actor, action, outcome, buildId, route, workspace, detail);
    }

    public Entry withOutcome(String outcome) {
      return new Entry(id, at, actor, action, outcome, buildId, route, workspace, detail);
    }

    public Entry withDetail(JsonNode detail) {
      return new Entry(id, at, actor, action, outcome, buildId, route, workspace, detail);
    }
  }

  public Future<Void> append(Entry e) {
    return append(pool, e);
  }

  /** Appends in {@code client}'s transaction, so that the entry commits with what it records. */
  public static Future<Void> append(SqlClient client, Entry e) {
    return client
        .preparedQuery(APPEND.text())
        .execute(
            Tuple.tuple()
                .addString(e.actor())
                .addString(e.action())
                .addString(e.outcome())
                .addLong(e.buildId())
                .addString(e.route())
                .addString(e.workspace())
                .addString(e.detail() == null ? null : Json.write(e.detail())))
        .mapEmpty();
  }

  /** Newest first; each filter applies when not null; {@code before}: an entry id (paging). */
  public Future<List<Entry>> list(
      String actor, String action, Long buildId, String outcome, Long before, int limit) {
    return pool.preparedQuery(LIST.text())
        .execute(
            Tuple.tuple()
                .addString(actor)
                .addString(action)
                .addLong(buildId)
                .addString(outcome)
                .addLong(before)
                .addInteger(limit))
        .map(
            rows -> {
              List<Entry> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                String d = r.getString("detail");
                out.add(
                    new Entry(
                        r.getLong("id"),
                        Rows.instant(r, "at"),
                        r.getString("actor"),
                        r.getString("action"),
                        r.getString("outcome"),
                        r.getLong("build_id"),
                        r.getString("route"),
                        r.getString("workspace"),
                        d == null ? null : Json.tree(d)));
              }
              return out;
            });
  }
}
