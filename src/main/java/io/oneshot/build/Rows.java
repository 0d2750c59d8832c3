package io.oneshot.build;

import com.fasterxml.jackson.core.type.TypeReference;
import io.oneshot.api.Json;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowSet;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** Reading the columns the stores share out of result rows. */
final class Rows {
  private static final TypeReference<Map<String, String>> STRING_MAP = new TypeReference<>() {};

  private Rows() {}

  static Instant instant(Row r, String column) {
    OffsetDateTime t = r.getOffsetDateTime(column);
    return t == null ? null : t.toInstant();
  }

  static Map<String, String> stringMap(String json) {
    try {
      return Json.MAPPER.readValue(json, STRING_MAP);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("tags column holds invalid JSON: " + json, e);
    }
  }

  /** The first row's {@code column} as a state; empty when no row came back (a lost race). */
  static Optional<BuildState> firstState(RowSet<Row> rows, String column) {
    return rows.rowCount() == 0
        ? Optional.empty()
        : Optional.of(BuildState.ofWire(rows.iterator().next().getString(column)));
  }

  /** The first row's string {@code column}; empty when no row came back. */
  static Optional<String> firstString(RowSet<Row> rows, String column) {
    return rows.rowCount() == 0
        ? Optional.empty()
        : Optional.of(rows.iterator().next().getString(column));
  }

  /** The runner bound to an attempt, from {@code runner_id} and {@code runner}; null: none. */
  static Runner runner(Row r, String idColumn, String detailsColumn) {
    String id = r.getString(idColumn);
    return id == null ? null : Runner.of(id, Json.tree(r.getString(detailsColumn)));
  }

  /** A build as {@code reads/build} and {@code reads/list} select it, without its timeline. */
  static Build build(Row r) {
    String kind = r.getString("launch_kind");
    Runner runner = runner(r, "runner_id", "runner");
    return new Build(
        r.getLong("id"),
        BuildState.ofWire(r.getString("status")),
        r.getString("route"),
        stringMap(r.getString("tags")),
        r.getString("workspace"),
        r.getInteger("priority"),
        r.getLong("rerun_of"),
        r.getInteger("attempt"),
        r.getString("provisioner"),
        Build.what(r.getString("provisioner"), r.getString("what")),
        r.getString("pod") == null ? null : Json.tree(r.getString("pod")),
        r.getString("reason"),
        instant(r, "created_at"),
        instant(r, "claimed_at"),
        instant(r, "launched_at"),
        instant(r, "started_at"),
        instant(r, "heartbeat_at"),
        instant(r, "cancel_requested_at"),
        instant(r, "finished_at"),
        r.getInteger("exit_code"),
        r.getString("error"),
        Json.tree(r.getString("outputs")),
        r.getString("usage") == null ? null : Json.tree(r.getString("usage")),
        kind == null
            ? null
            : new Build.Launch(
                kind,
                r.getString("launch_name"),
                r.getString("launch_namespace"),
                r.getString("launch_pod"),
                instant(r, "launch_removed_at"),
                r.getString("launch_removed_why")),
        r.getInteger("state_read_version"),
        r.getInteger("state_written_version"),
        runner == null ? null : Build.BoundRunner.of(runner, instant(r, "runner_since")),
        r.getString("submitted_by"),
        List.of());
  }
}
