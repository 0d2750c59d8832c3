package io.oneshot.dispatch;

import io.oneshot.config.Backoff;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.pgclient.PgConnectOptions;
import io.vertx.pgclient.PgConnection;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * LISTENs on a dedicated connection and hands each notification to its channel's handler.
 *
 * <p>Reconnect policy: when the connection closes or fails its health check, reconnect after a
 * {@link Backoff} ({@code database.reconnect}: 100 ms doubling to 5 s by default), for as long as
 * the listener is open; the backoff starts over once LISTEN succeeds. Health check: a {@code SELECT
 * 1} every {@code healthInterval} that must answer within half of it, else the connection is closed
 * and replaced. After every successful LISTEN, {@code onListening} runs, so that whatever was
 * notified while no one listened is picked up by a poll (LISTEN first, then poll).
 *
 * <p>Runs on one Vert.x event-loop context; the handlers must not block.
 */
public final class Listener implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Listener.class);

  private final Vertx vertx;
  private final Context context;
  private final PgConnectOptions options;
  private final Map<String, Consumer<String>> channels;
  private final Runnable onListening;
  private final long healthMs;
  private final AtomicLong reconnects = new AtomicLong();
  private final AtomicLong notifications = new AtomicLong();
  private volatile PgConnection conn;
  private volatile boolean open;
  private volatile boolean listening;
  private final Backoff.Sequence backoff;
  private long healthTimer = -1;
  private boolean everConnected;

  public Listener(
      Vertx vertx,
      PgConnectOptions options,
      Map<String, Consumer<String>> channels,
      Runnable onListening,
      Duration healthInterval,
      Backoff reconnect) {
    this.vertx = vertx;
    this.context = vertx.getOrCreateContext();
    this.options = options;
    this.channels = Map.copyOf(channels);
    this.onListening = onListening;
    this.healthMs = healthInterval.toMillis();
    this.backoff = reconnect.sequence();
  }

  public void start() {
    open = true;
    context.runOnContext(v -> connect());
  }

  /** Whether LISTEN is in effect right now. */
  public boolean listening() {
    return listening;
  }

  /** How many times the connection was re-established after the first. */
  public long reconnects() {
    return reconnects.get();
  }

  /** Notifications received, all channels. */
  public long notifications() {
    return notifications.get();
  }

  /** The backend pid of the listening connection, or -1 (for tests that cut it). */
  public int backendPid() {
    PgConnection c = conn;
    return c == null ? -1 : c.processId();
  }

  private void connect() {
    if (!open) {
      return;
    }
    PgConnection.connect(vertx, options)
        .compose(this::listen)
        .onSuccess(
            c -> {
              if (!open) {
                c.close();
                return;
              }
              if (everConnected) {
                reconnects.incrementAndGet();
                log.info("Listener reconnected; polling for anything notified meanwhile.");
              }
              everConnected = true;
              backoff.reset();
              listening = true;
              scheduleHealthCheck(c);
              safely(onListening);
            })
        .onFailure(
            e -> {
              log.warn(
                  "Listener cannot connect: {}. Retrying in {} ms.",
                  e.getMessage(),
                  backoff.upcoming().toMillis());
              retry();
            });
  }

  private Future<PgConnection> listen(PgConnection c) {
    conn = c;
    c.notificationHandler(
        n -> {
          notifications.incrementAndGet();
          Consumer<String> h = channels.get(n.getChannel());
          if (h != null) {
            try {
              h.accept(n.getPayload());
            } catch (RuntimeException e) {
              log.warn("Notification handler for {} failed: {}.", n.getChannel(), e.toString());
            }
          }
        });
    c.closeHandler(
        v -> {
          if (conn == c) {
            lost("the connection closed");
          }
        });
    c.exceptionHandler(e -> log.debug("Listener connection error: {}", e.toString()));
    StringBuilder sql = new StringBuilder();
    for (String ch : channels.keySet()) {
      sql.append("LISTEN ").append(ch).append(';');
    }
    return c.query(sql.toString())
        .execute()
        .map(r -> c)
        .onFailure(
            e -> {
              conn = null;
              c.close();
            });
  }

  private void lost(String why) {
    boolean was = listening;
    listening = false;
    conn = null;
    cancelHealthCheck();
    if (!open) {
      return;
    }
    if (was) {
      log.warn(
          "Listener lost: {}. Reconnecting in {} ms; polls continue meanwhile.",
          why,
          backoff.upcoming().toMillis());
    }
    retry();
  }

  private void retry() {
    vertx.setTimer(backoff.next().toMillis(), t -> connect());
  }

  private void scheduleHealthCheck(PgConnection c) {
    cancelHealthCheck();
    healthTimer =
        vertx.setPeriodic(
            healthMs,
            t -> {
              if (conn != c) {
                return;
              }
              long timeout =
                  vertx.setTimer(
                      Math.max(50, healthMs / 2),
                      x -> {
                        if (conn == c) {
                          log.warn(
                              "Listener health check got no answer; replacing the connection.");
                          conn = null;
                          c.close();
                          lost("the health check got no answer");
                        }
                      });
              c.query("SELECT 1")
                  .execute()
                  .onComplete(
                      r -> {
                        vertx.cancelTimer(timeout);
                        if (r.failed() && conn == c) {
                          conn = null;
                          c.close();
                          lost("the health check failed: " + r.cause().getMessage());
                        }
                      });
            });
  }

  private void cancelHealthCheck() {
    if (healthTimer >= 0) {
      vertx.cancelTimer(healthTimer);
      healthTimer = -1;
    }
  }

  private static void safely(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      log.warn("Listener callback failed: {}.", e.toString());
    }
  }

  @Override
  public void close() {
    open = false;
    listening = false;
    context.runOnContext(
        v -> {
          cancelHealthCheck();
          PgConnection c = conn;
          conn = null;
          if (c != null) {
            c.close();
          }
        });
  }
}
