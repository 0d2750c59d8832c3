package io.oneshot.build;

import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Tuple;
import java.util.LinkedHashSet;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The notifications of runners' completions, sent after each one committed (db/009_wakes.sql says
 * why not inside it): the dispatcher and the sources hear that capacity was freed, a build's log
 * followers that it ended. One statement is in flight at a time; builds that end meanwhile go
 * together in the next, so a burst of completions costs a few notifications, not one each.
 */
final class Wakes {
  private static final Logger log = LoggerFactory.getLogger(Wakes.class);
  private static final Sql WAKE = Sql.load("runner/wake");

  private final Pool pool;
  private final Set<Long> ended = new LinkedHashSet<>();
  private boolean sending;

  Wakes(Pool pool) {
    this.pool = pool;
  }

  /** {@code buildId} ended, and that is committed. */
  void ended(long buildId) {
    synchronized (this) {
      ended.add(buildId);
      if (sending) {
        return;
      }
      sending = true;
    }
    sendNext();
  }

  private void sendNext() {
    Long[] ids;
    synchronized (this) {
      if (ended.isEmpty()) {
        sending = false;
        return;
      }
      ids = ended.toArray(new Long[0]);
      ended.clear();
    }
    pool.preparedQuery(WAKE.text())
        .execute(Tuple.of(ids))
        .onComplete(
            r -> {
              if (r.failed()) {
                // The dispatcher's poll finds the freed capacity; a follower asks again.
                log.warn(
                    "Could not announce that {} build(s) ended: {}. The next poll finds them.",
                    ids.length,
                    r.cause().getMessage());
              }
              sendNext();
            });
  }
}
