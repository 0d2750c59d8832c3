package io.oneshot.testing;

import io.oneshot.build.BuildStore;
import io.oneshot.build.Database;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.util.Map;

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
      Database.await(store.mirror(config.routes(), config.limits()));
    }
  }

  @Override
  public void close() {
    db.close();
    Database.await(vertx.close());
  }
}
