package io.oneshot.dispatch;

import io.oneshot.api.Metrics;
import io.oneshot.build.BuildStore;
import io.oneshot.build.Database;
import io.oneshot.config.OneshotConfig;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Applies retention on the leading replica: every {@code retention.interval}, each route's finished
 * builds past its age or count are deleted, a batch per statement, so that no statement holds many
 * rows or runs long. A route that keeps everything is skipped.
 */
public final class Pruner implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Pruner.class);

  /** Batches per route and pass at most: a large backlog is worked off over several passes. */
  static final int MAX_BATCHES = 20;

  private final BuildStore store;
  private final OneshotConfig config;
  private final BooleanSupplier leader;
  private final Metrics metrics;
  private final LoopThread worker = new LoopThread("oneshot-retention");

  public Pruner(BuildStore store, OneshotConfig config, BooleanSupplier leader, Metrics metrics) {
    this.store = store;
    this.config = config;
    this.leader = leader;
    this.metrics = metrics;
  }

  public void start() {
    if (config.routes().stream().allMatch(r -> r.retention().keepsAll())) {
      return;
    }
    worker.start(this::loop);
  }

  private void loop() {
    while (worker.running()) {
      try {
        worker.await(config.retention().interval().toMillis());
        if (worker.running()) {
          pass();
        }
      } catch (InterruptedException e) {
        break;
      } catch (RuntimeException e) {
        log.warn("Retention pass failed: {}. Will try again.", Dispatcher.describe(e));
      }
    }
  }

  /** One pass over every route; returns how many builds were deleted. */
  public int pass() {
    if (!leader.getAsBoolean()) {
      return 0;
    }
    int total = 0;
    for (OneshotConfig.Route route : config.routes()) {
      OneshotConfig.Retention r = route.retention();
      if (r.keepsAll()) {
        continue;
      }
      int deleted = 0;
      for (int i = 0; i < MAX_BATCHES; i++) {
        int n =
            Database.await(store.retention().prune(route.name(), r.age(), r.count(), r.batch()));
        deleted += n;
        if (n < r.batch()) {
          break;
        }
      }
      if (deleted > 0) {
        metrics.deleted(route.name(), deleted);
        log.info("Retention deleted {} finished builds of route {}.", deleted, route.name());
      }
      total += deleted;
    }
    return total;
  }

  @Override
  public void close() {
    worker.close();
  }
}
