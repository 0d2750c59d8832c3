package io.oneshot.testing;

import io.oneshot.build.BuildStore;
import io.oneshot.build.BuildToken;
import io.oneshot.build.Database;
import io.oneshot.build.QueueStore;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;

/** A Vert.x instance, a pool and a {@link BuildStore} on the emptied test database. */
public final class StoreFixture implements AutoCloseable {
  public final Vertx vertx = Vertx.vertx();
  public final Database db;
  public final BuildStore store;
  public final OneshotConfig config;

  /** Empties the queue and mirrors the routes. */
  public StoreFixture(String routesYaml) {
    this(routesYaml, true);
  }

  /** {@code fresh = false}: another store on the same queue, as a second dispatcher would be. */
  public StoreFixture(String routesYaml, boolean fresh) {
    if (fresh) {
      Sql.reset();
    }
    db = Database.open(vertx, TestDatabase.url(), 16, "test");
    store = new BuildStore(db.pool());
    config =
        ConfigLoader.parse(
            "launcher: {kind: local, local: {runDir: " + Path.of("target") + "}}\n" + routesYaml,
            "test",
            Map.of());
    if (fresh) {
      Database.await(store.routeMirror().write(config));
    }
  }

  /** Fresh build tokens, as the dispatcher hands them to a claim. */
  public static List<BuildToken> tokens(int n) {
    return IntStream.range(0, n).mapToObj(i -> BuildToken.generate()).toList();
  }

  /** {@link #tokens} as a claim takes them. */
  public static List<QueueStore.ClaimToken> claimTokens(int n) {
    return tokens(n).stream().map(QueueStore.ClaimToken::of).toList();
  }

  /** Enqueues {@code n} builds of a script that does nothing, through {@code oneshot.enqueue()}. */
  public void enqueueNoops(int n) {
    io.oneshot.testing.Sql.exec(
        "SELECT oneshot.enqueue('{}', '{\"provisioner\": \"script\", \"command\": [\"true\"]}')"
            + " FROM generate_series(1, "
            + n
            + ")");
  }

  /**
   * Claims up to {@code n} builds with fresh tokens under a global limit of {@code globalLimit},
   * unfenced, as launcher {@code kind}.
   */
  public List<QueueStore.Claimed> claim(int globalLimit, int n, String kind) {
    return Database.await(store.queue().claim(globalLimit, kind, tokens(n)));
  }

  /** Enqueues {@code n} no-op builds and claims them all (global limit 100, launcher "test"). */
  public List<QueueStore.Claimed> claimedNoops(int n) {
    enqueueNoops(n);
    List<QueueStore.Claimed> c = claim(100, n, "test");
    if (c.size() != n) {
      throw new IllegalStateException("claimed " + c.size() + " of " + n + " builds");
    }
    return c;
  }

  @Override
  public void close() {
    db.close();
    Database.await(vertx.close());
  }
}
