package io.oneshot.build;

/**
 * The PostgreSQL advisory locks oneshot takes, as {@code (class, key)} pairs, so that no two uses
 * collide and a DBA can find them in {@code pg_locks} ({@code classid = 1869505907}).
 */
public final class AdvisoryLocks {
  /** "ones" in ASCII. */
  public static final int CLASS = 0x6f6e6573;

  /** Held while migrations run: two dispatchers starting together never race. */
  public static final int MIGRATE = 1;

  /** Held for the length of one claim transaction: claims are serialized, limits always hold. */
  public static final int CLAIM = 2;

  /** Held by the leading dispatcher's dedicated connection for as long as it leads. */
  public static final int LEADER = 3;

  /**
   * Held for one queue source's top-up: its count of builds in flight, its look at the source and
   * its inserts are one step, never interleaved with another replica's (claims are not held up).
   */
  public static final int SOURCES = 4;

  private AdvisoryLocks() {}

  private static final Sql FENCED_LOCK = Sql.load("queue/claim-lock");

  /**
   * Takes lock {@code key} for the rest of {@code conn}'s transaction ({@code queue/claim-lock}),
   * and checks that {@code fence} (null: no check) still holds the leader lock: fails with {@link
   * FencedOutException} when it does not, having aborted the transaction, so that nothing it goes
   * on to write commits, even what was sent behind this statement before its answer came.
   */
  static io.vertx.core.Future<Void> takeFenced(
      io.vertx.sqlclient.SqlConnection conn, int key, LeaderFence fence) {
    io.vertx.sqlclient.Tuple args =
        io.vertx.sqlclient.Tuple.of(
            CLASS,
            key,
            fence == null ? null : fence.pid(),
            fence == null ? null : fence.sessionStart(),
            (long) CLASS,
            (long) LEADER);
    return conn.preparedQuery(FENCED_LOCK.text())
        .execute(args)
        .<Void>mapEmpty()
        .recover(
            e ->
                io.vertx.core.Future.failedFuture(
                    fencedOut(e) ? new FencedOutException(fence) : e));
  }

  /** The error {@code oneshot.fenced_out} raises (SQLSTATE OS412): the fence did not hold. */
  static boolean fencedOut(Throwable e) {
    return e instanceof io.vertx.pgclient.PgException pg && "OS412".equals(pg.getSqlState());
  }
}
