package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.SqlClient;
import io.vertx.sqlclient.Tuple;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Terraform state of workspaces, versioned: uploads from the running attempt's runner (fenced by
 * token, status and runner in {@code sql/state/save.sql}), and the versions and states the API
 * reads.
 */
public final class StateStore {
  private static final Sql SAVE = Sql.load("state/save");
  private static final Sql VERSIONS = Sql.load("state/versions");
  private static final Sql READ = Sql.load("state/read");

  private final Pool pool;

  private final Sealer sealer;

  public StateStore(Pool pool, Sealer sealer) {
    this.sealer = sealer;
    this.pool = pool;
  }

  /**
   * A terraform state as provisionerd uploads it: {@code bytes} its size in UTF-8, counted once
   * when it is checked against the size cap; serial and lineage are read from it.
   */
  public record StateUpload(String state, int bytes, Long serial, String lineage) {}

  /** What became of a state upload. */
  public sealed interface StateSaved {
    /**
     * Stored as {@code version}; {@code note}, when not null, says that terraform started a new
     * lineage, which is worth a line in the build's log.
     */
    record Stored(int version, String note, long buildId) implements StateSaved {}

    /** Refused: it cannot be this attempt's terraform's next state ({@code why} says how). */
    record Refused(String why) implements StateSaved {}

    /** The token is not the running attempt's, the caller not its runner, or no workspace. */
    record NotRunning() implements StateSaved {}
  }

  public Future<StateSaved> saveState(
      byte[] tokenHash, String runnerId, StateUpload s, boolean last) {
    return saveState(pool, sealer, tokenHash, runnerId, s, last);
  }

  /** Where the sealer binds a workspace's state, so that nothing else sealed opens as one. */
  static final String CONTEXT = "workspace-state";

  static Future<StateSaved> saveState(
      SqlClient client,
      Sealer sealer,
      byte[] tokenHash,
      String runnerId,
      StateUpload s,
      boolean last) {
    return client
        .preparedQuery(SAVE.text())
        .execute(
            Tuple.tuple()
                .addBuffer(Buffer.buffer(tokenHash))
                .addString(sealer.seal(s.state(), CONTEXT))
                .addLong(s.serial())
                .addString(s.lineage())
                .addBoolean(last)
                .addString(runnerId)
                .addInteger(s.bytes()))
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return new StateSaved.NotRunning();
              }
              Row r = rows.iterator().next();
              if (r.getString("refused") != null) {
                return new StateSaved.Refused(r.getString("refused"));
              }
              return new StateSaved.Stored(
                  r.getInteger("version"), r.getString("note"), r.getLong("id"));
            });
  }

  /**
   * One version of a workspace's state, without the state itself. {@code finished}: the build that
   * wrote it has reported its outcome (until then the version follows its apply).
   */
  public record StateVersion(
      int version,
      long buildId,
      int attempt,
      int bytes,
      Long serial,
      String lineage,
      boolean finished,
      Instant createdAt,
      Instant updatedAt) {}

  public Future<List<StateVersion>> stateVersions(String workspace) {
    return pool.preparedQuery(VERSIONS.text())
        .execute(Tuple.of(workspace))
        .map(
            rows -> {
              List<StateVersion> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(
                    new StateVersion(
                        r.getInteger("version"),
                        r.getLong("build_id"),
                        r.getInteger("attempt"),
                        r.getInteger("bytes"),
                        r.getLong("serial"),
                        r.getString("lineage"),
                        r.getBoolean("final"),
                        Rows.instant(r, "created_at"),
                        Rows.instant(r, "updated_at")));
              }
              return out;
            });
  }

  /** The state of one version (the latest when {@code version} is null). */
  public Future<Optional<String>> state(String workspace, Integer version) {
    return pool.preparedQuery(READ.text())
        .execute(Tuple.of(workspace, version))
        .map(rows -> Rows.firstString(rows, "state").map(st -> sealer.open(st, CONTEXT)));
  }
}
