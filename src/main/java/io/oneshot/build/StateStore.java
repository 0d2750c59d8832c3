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
  private static final Sql NEXT_VERSION = Sql.load("state/next-version");
  private static final Sql VERSIONS = Sql.load("state/versions");
  private static final Sql READ = Sql.load("state/read");

  private final Pool pool;

  private final Sealer sealer;

  public StateStore(Pool pool, Sealer sealer) {
    this.sealer = sealer;
    this.pool = pool;
  }

  /**
   * A workspace's state as provisionerd uploads it: {@code bytes} its size in UTF-8, counted once
   * when it is checked against the size cap; serial and lineage are read from a terraform state
   * (null for a Pulumi checkpoint); {@code format} is {@link #TERRAFORM} or {@link #PULUMI}.
   */
  public record StateUpload(String state, int bytes, Long serial, String lineage, String format) {}

  /** The formats of a workspace's state: terraform's state, or a Pulumi stack's checkpoint. */
  public static final String TERRAFORM = "terraform";

  public static final String PULUMI = "pulumi";

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

  /** How often an upload is sealed again when its version moved meanwhile, at most. */
  private static final int RESEALS = 3;

  /**
   * Stores an upload: the version it will be is read first ({@code state/next-version}), the state
   * sealed bound to its route, workspace and that version, then stored as that version alone
   * ({@code state/save}); if the version moved in between, it is sealed and tried again.
   */
  static Future<StateSaved> saveState(
      SqlClient client,
      Sealer sealer,
      byte[] tokenHash,
      String runnerId,
      StateUpload s,
      boolean last) {
    return saveState(client, sealer, tokenHash, runnerId, s, last, RESEALS);
  }

  private static Future<StateSaved> saveState(
      SqlClient client,
      Sealer sealer,
      byte[] tokenHash,
      String runnerId,
      StateUpload s,
      boolean last,
      int tries) {
    return client
        .preparedQuery(NEXT_VERSION.text())
        .execute(Tuple.of(Buffer.buffer(tokenHash), runnerId))
        .compose(
            next -> {
              if (next.rowCount() == 0) {
                return Future.succeededFuture(new StateSaved.NotRunning());
              }
              Row n = next.iterator().next();
              int version = n.getInteger("version");
              Sealer.Context place =
                  Sealer.workspaceState(n.getString("route"), n.getString("workspace"), version);
              String sealed = sealer.seal(s.state(), place);
              return client
                  .preparedQuery(SAVE.text())
                  .execute(
                      Tuple.tuple()
                          .addBuffer(Buffer.buffer(tokenHash))
                          .addString(sealed)
                          .addLong(s.serial())
                          .addString(s.lineage())
                          .addBoolean(last)
                          .addString(runnerId)
                          .addInteger(s.bytes())
                          .addInteger(version)
                          .addString(s.format()))
                  .compose(
                      rows -> {
                        if (rows.rowCount() == 0) {
                          return Future.succeededFuture(new StateSaved.NotRunning());
                        }
                        Row r = rows.iterator().next();
                        if (r.getString("refused") != null) {
                          return Future.succeededFuture(
                              new StateSaved.Refused(r.getString("refused")));
                        }
                        if (r.getInteger("version") == null) {
                          return tries > 1
                              ? saveState(client, sealer, tokenHash, runnerId, s, last, tries - 1)
                              : Future.succeededFuture(
                                  new StateSaved.Refused(
                                      "the workspace's next version kept moving while this state"
                                          + " was sealed"));
                        }
                        return Future.succeededFuture(
                            new StateSaved.Stored(
                                r.getInteger("version"), r.getString("note"), r.getLong("id")));
                      });
            });
  }

  /**
   * One version of a workspace's state, without the state itself. {@code finished}: the build that
   * wrote it has reported its outcome (until then the version follows its apply); {@code format}:
   * {@link #TERRAFORM} or {@link #PULUMI}.
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
      Instant updatedAt,
      String format) {}

  /** The state versions of route {@code route}'s workspace {@code workspace}, newest first. */
  public Future<List<StateVersion>> stateVersions(String route, String workspace) {
    return pool.preparedQuery(VERSIONS.text())
        .execute(Tuple.of(route, workspace))
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
                        Rows.instant(r, "updated_at"),
                        r.getString("format")));
              }
              return out;
            });
  }

  /**
   * The state of one version of route {@code route}'s workspace {@code workspace} (the latest when
   * {@code version} is null).
   */
  public Future<Optional<String>> state(String route, String workspace, Integer version) {
    return pool.preparedQuery(READ.text())
        .execute(Tuple.of(route, workspace, version))
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return Optional.<String>empty();
              }
              Row r = rows.iterator().next();
              return Optional.ofNullable(r.getString("state"))
                  .map(
                      st ->
                          sealer.open(
                              st,
                              Sealer.workspaceState(route, workspace, r.getInteger("version"))));
            });
  }
}
