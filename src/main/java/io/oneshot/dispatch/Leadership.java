package io.oneshot.dispatch;

import io.oneshot.build.AdvisoryLocks;
import io.oneshot.build.LeaderFence;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.pgclient.PgConnectOptions;
import io.vertx.pgclient.PgConnection;
import io.vertx.sqlclient.Tuple;
import java.time.Duration;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Decides which dispatcher replica claims: the one whose dedicated connection holds the session
 * advisory lock {@link AdvisoryLocks#LEADER}. The others try again every {@code interval}. The
 * leader checks its connection at the same interval and steps down at once when the check fails or
 * the connection closes (PostgreSQL releases the lock with the session). Claims carry the lock
 * session's {@link LeaderFence}, so a replica that lost the lock cannot claim even before it
 * notices.
 */
public final class Leadership implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Leadership.class);

  private final Vertx vertx;
  private final Context context;
  private final PgConnectOptions options;
  private final long intervalMs;
  private final Consumer<Boolean> onChange;
  private volatile boolean leader;
  private volatile LeaderFence fence;
  private volatile boolean open;
  private PgConnection conn;
  private long timer = -1;

  public Leadership(
      Vertx vertx, PgConnectOptions options, Duration interval, Consumer<Boolean> onChange) {
    this.vertx = vertx;
    this.context = vertx.getOrCreateContext();
    this.options = options;
    this.intervalMs = interval.toMillis();
    this.onChange = onChange;
  }

  public void start() {
    open = true;
    context.runOnContext(v -> connect());
  }

  public boolean isLeader() {
    return leader;
  }

  /** The session that holds the lock while this replica leads; null when it does not. */
  public LeaderFence fence() {
    return leader ? fence : null;
  }

  private void connect() {
    if (!open) {
      return;
    }
    PgConnection.connect(vertx, options)
        .onSuccess(
            c -> {
              if (!open) {
                c.close();
                return;
              }
              conn = c;
              c.closeHandler(v -> lost(c, "its database connection closed"));
              // A leader that vanishes without closing its connection (its node lost, a
              // partition) must not hold the lock for TCP's default hours: the server probes the
              // idle session and ends it within a few intervals. Probes go only while nothing the
              // server sent waits for an acknowledgement; a leader that vanished with the answer
              // to its check in flight (clients delay their ACKs by some milliseconds) is left to
              // retransmissions, about 15 minutes, unless the user timeout ends the session after
              // the same few intervals. Ignored over a Unix socket.
              long idle = Math.max(1, 2 * intervalMs / 1000);
              long probe = Math.max(1, intervalMs / 1000);
              long silentMs = (idle + 3 * probe) * 1000;
              c.query(
                      "SET tcp_keepalives_idle = "
                          + idle
                          + "; SET tcp_keepalives_interval = "
                          + probe
                          + "; SET tcp_keepalives_count = 3"
                          + "; SET tcp_user_timeout = "
                          + silentMs)
                  .execute()
                  .onComplete(
                      r -> {
                        if (r.failed()) {
                          // One implicit transaction: none of the settings took.
                          log.warn(
                              "Leadership: cannot set TCP keepalives on the lock connection ({});"
                                  + " a leader whose node vanishes keeps the lock until TCP gives"
                                  + " up.",
                              r.cause().getMessage());
                        }
                        tryLock(c);
                      });
            })
        .onFailure(
            e -> {
              log.debug("Leadership: cannot connect: {}", e.getMessage());
              later(this::connect);
            });
  }

  private void tryLock(PgConnection c) {
    if (conn != c || !open) {
      return;
    }
    c.preparedQuery(
            "SELECT pg_try_advisory_lock($1, $2) AS locked, pg_backend_pid() AS pid,"
                + " (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())"
                + " AS since")
        .execute(Tuple.of(AdvisoryLocks.CLASS, AdvisoryLocks.LEADER))
        .onSuccess(
            rows -> {
              var row = rows.iterator().next();
              if (row.getBoolean("locked")) {
                fence = new LeaderFence(row.getInteger("pid"), row.getOffsetDateTime("since"));
                promote();
                later(() -> check(c));
              } else {
                later(() -> tryLock(c));
              }
            })
        .onFailure(e -> lost(c, "the lock query failed: " + e.getMessage()));
  }

  private void check(PgConnection c) {
    if (conn != c || !open) {
      return;
    }
    long deadline =
        vertx.setTimer(
            Math.max(50, intervalMs),
            t -> lost(c, "its database connection did not answer within " + intervalMs + " ms"));
    c.query("SELECT 1")
        .execute()
        .onComplete(
            r -> {
              vertx.cancelTimer(deadline);
              if (r.succeeded()) {
                later(() -> check(c));
              } else {
                lost(c, "its connection check failed: " + r.cause().getMessage());
              }
            });
  }

  private void promote() {
    if (!leader) {
      leader = true;
      log.info("This dispatcher leads: it claims and launches builds.");
      notify(true);
    }
  }

  private void lost(PgConnection c, String why) {
    if (conn != c) {
      return;
    }
    conn = null;
    c.close();
    if (leader) {
      leader = false;
      log.warn("This dispatcher stopped leading: {}.", why);
      notify(false);
    }
    if (open) {
      later(this::connect);
    }
  }

  private void notify(boolean leading) {
    try {
      onChange.accept(leading);
    } catch (RuntimeException e) {
      log.warn("Leadership listener failed: {}.", e.toString());
    }
  }

  private void later(Runnable r) {
    timer = vertx.setTimer(intervalMs, t -> r.run());
  }

  @Override
  public void close() {
    open = false;
    boolean was = leader;
    leader = false;
    if (was) {
      notify(false);
    }
    context.runOnContext(
        v -> {
          if (timer >= 0) {
            vertx.cancelTimer(timer);
          }
          PgConnection c = conn;
          conn = null;
          if (c != null) {
            c.close();
          }
        });
  }
}
