package io.oneshot.server;

import io.oneshot.api.Metrics;
import io.oneshot.build.BuildStore;
import io.vertx.core.Future;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps {@code oneshot_builds_queued} and {@code oneshot_builds_running}, the teams' gauges ({@code
 * oneshot_team_*}) and the holds true: on the leading replica they are read from the database at
 * every scrape; on the others they are not exported at all, so that a sum across replicas counts
 * each build once.
 */
final class QueueGauges {
  private static final Logger log = LoggerFactory.getLogger(QueueGauges.class);

  private final BuildStore store;
  private final Metrics metrics;
  private final BooleanSupplier leader;

  private final int globalLimit;

  QueueGauges(BuildStore store, Metrics metrics, BooleanSupplier leader, int globalLimit) {
    this.globalLimit = globalLimit;
    this.store = store;
    this.metrics = metrics;
    this.leader = leader;
  }

  /** Brings the gauges up to date; never fails (a scrape still answers with the rest). */
  Future<Void> refresh() {
    if (!leader.getAsBoolean()) {
      metrics.noQueue();
      return Future.succeededFuture();
    }
    return store
        .reads()
        .routes()
        .onSuccess(metrics::queue)
        .compose(x -> store.share().teams())
        .onSuccess(teams -> metrics.teams(teams, globalLimit))
        .onFailure(
            e -> {
              log.debug("Cannot read the queue for its gauges: {}", e.toString());
              metrics.noQueue();
            })
        .<Void>mapEmpty()
        .otherwiseEmpty();
  }
}
