package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowSet;
import io.vertx.sqlclient.Tuple;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Fair share between teams (db/019_fair_share.sql, docs/fair-share.md): the operators' holds on
 * routes and teams, and the teams' shares and use. The claim itself weighs the teams (
 * queue/claim.sql); this store holds what people ask and read of it.
 */
public final class ShareStore {
  private static final Sql HOLD = Sql.load("share/hold");
  private static final Sql RELEASE = Sql.load("share/release");
  private static final Sql TEAMS = Sql.load("share/teams");
  private static final Sql SHARES = Sql.load("share/shares");

  private final Pool pool;
  private final Pool readPool;

  ShareStore(Pool pool, Pool readPool) {
    this.pool = pool;
    this.readPool = readPool;
  }

  /** What is held: a route, or a team (every route in it). */
  public enum Kind {
    ROUTE,
    TEAM;

    public String wire() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** An operator's hold: since when, by whom, why. */
  public record Hold(Instant at, String by, String why) {
    static Hold of(Row r) {
      Instant at = Rows.instant(r, "held_at");
      return at == null ? null : new Hold(at, r.getString("held_by"), r.getString("held_why"));
    }
  }

  /**
   * Holds route or team {@code name}, with the audit entry in the same transaction; empty when
   * there is none of that name (nothing is written then).
   */
  public Future<Optional<Hold>> hold(
      Kind kind, String name, String by, String why, AuditStore.Entry audit) {
    return pool.withTransaction(
        conn ->
            conn.preparedQuery(HOLD.text())
                .execute(Tuple.of(kind.wire(), name, by, why))
                .compose(
                    rows -> {
                      if (rows.rowCount() == 0) {
                        return Future.succeededFuture(Optional.<Hold>empty());
                      }
                      Hold h = Hold.of(rows.iterator().next());
                      return AuditStore.append(conn, audit).map(x -> Optional.of(h));
                    }));
  }

  /**
   * Releases route or team {@code name}, with the audit entry in the same transaction when it was
   * held; empty when there is none of that name.
   */
  public Future<Optional<Released>> release(Kind kind, String name, AuditStore.Entry audit) {
    return pool.withTransaction(
        conn ->
            conn.preparedQuery(RELEASE.text())
                .execute(Tuple.of(kind.wire(), name))
                .compose(
                    rows -> {
                      if (rows.rowCount() == 0) {
                        return Future.succeededFuture(Optional.<Released>empty());
                      }
                      Hold was = Hold.of(rows.iterator().next());
                      if (was == null) {
                        return Future.succeededFuture(Optional.of(new Released(null)));
                      }
                      return AuditStore.append(conn, audit)
                          .map(x -> Optional.of(new Released(was)));
                    }));
  }

  /** A release's answer: the hold there was ({@code null}: it was not held). */
  public record Released(Hold was) {}

  /**
   * A team as the API shows it: its rules ({@code borrowLimit} and {@code maxConcurrent} null when
   * unset), its routes in their order, its builds running (launching or running) and queued, and
   * its hold (null: none).
   */
  public record Team(
      String name,
      int weight,
      int guaranteed,
      Integer borrowLimit,
      Integer maxConcurrent,
      List<String> routes,
      long running,
      long queued,
      Hold held) {}

  public Future<List<Team>> teams() {
    return readPool
        .query(TEAMS.text())
        .execute()
        .map(
            rows -> {
              List<Team> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(
                    new Team(
                        r.getString("name"),
                        r.getInteger("weight"),
                        r.getInteger("guaranteed"),
                        r.getInteger("borrow_limit"),
                        r.getInteger("max_concurrent"),
                        List.of(r.getArrayOfStrings("routes")),
                        r.getLong("running"),
                        r.getLong("queued"),
                        Hold.of(r)));
              }
              return out;
            });
  }

  /**
   * A team's share of {@code globalLimit} by weight among {@code totalWeight}, every team's: what
   * it counts on when every team wants slots.
   */
  public static double share(int weight, int totalWeight, int globalLimit) {
    return totalWeight == 0 ? 0 : (double) globalLimit * weight / totalWeight;
  }

  /**
   * The slots a team with {@code live} builds borrows: those past its share (rounded up, as the
   * claim counts its borrowLimit from) and its guarantee.
   */
  public static int borrowed(int live, double share, int guaranteed) {
    return Math.max(0, live - Math.max(guaranteed, (int) Math.ceil(share)));
  }

  /**
   * A team as a wait reason weighs it: its rules, whether it is held, its live builds, and whether
   * a build of a route of it not held waits.
   */
  public record Share(
      String name,
      int weight,
      int guaranteed,
      Integer borrowLimit,
      Integer maxConcurrent,
      boolean held,
      int live,
      boolean waiting) {}

  public Future<List<Share>> shares() {
    return readPool.query(SHARES.text()).execute().map(ShareStore::shares);
  }

  static List<Share> shares(RowSet<Row> rows) {
    List<Share> out = new ArrayList<>(rows.rowCount());
    for (Row r : rows) {
      out.add(
          new Share(
              r.getString("name"),
              r.getInteger("weight"),
              r.getInteger("guaranteed"),
              r.getInteger("borrow_limit"),
              r.getInteger("max_concurrent"),
              r.getBoolean("held"),
              r.getInteger("live"),
              r.getBoolean("waiting")));
    }
    return out;
  }
}
