package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Tuple;
import java.time.Duration;

/** The end of a finished build's life: deleted, with its logs and timeline, when it is old. */
public final class RetentionStore {
  private static final Sql PRUNE = Sql.load("retention/prune");

  private final Pool pool;

  RetentionStore(Pool pool) {
    this.pool = pool;
  }

  /**
   * Deletes up to {@code batch} finished builds of {@code route}, oldest first: those finished more
   * than {@code age} ago (null: whatever their age) and those beyond the newest {@code count} (0:
   * no cap). Builds whose terraform state a workspace keeps stay. Returns how many were deleted.
   */
  public Future<Integer> prune(String route, Duration age, int count, int batch) {
    return pool.preparedQuery(PRUNE.text())
        .execute(Tuple.of(route, age == null ? null : age.toMillis(), count, batch))
        .map(rows -> rows.rowCount());
  }
}
