package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.tuple;

import io.oneshot.testing.TestDatabase;
import io.vertx.core.Vertx;
import io.vertx.sqlclient.Row;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class MigratorTest {
  private Vertx vertx;

  @BeforeEach
  void start() {
    vertx = Vertx.vertx();
  }

  @AfterEach
  void stop() {
    Database.await(vertx.close());
  }

  @Test
  void everyMigrationFileIsListedInOrder() throws Exception {
    List<String> files;
    try (Stream<Path> s = Files.list(Path.of("src/main/resources/db"))) {
      files =
          s.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".sql")).sorted().toList();
    }
    assertThat(Migrator.MIGRATIONS).isEqualTo(files);
    for (int i = 0; i < files.size(); i++) {
      assertThat(files.get(i)).startsWith(String.format("%03d_", i + 1));
    }
  }

  @Test
  void concurrentStartersMigrateOnceWithoutRacing() throws Exception {
    String url = TestDatabase.fresh();
    ExecutorService pool = Executors.newFixedThreadPool(4);
    List<Database> dbs = new ArrayList<>();
    List<Future<Migrator.Result>> results = new ArrayList<>();
    try {
      for (int i = 0; i < 4; i++) {
        Database db = Database.open(vertx, url, 1, "migrate-" + i);
        dbs.add(db);
        results.add(pool.submit((Callable<Migrator.Result>) () -> Migrator.migrate(db)));
      }
      int appliedTotal = 0;
      for (Future<Migrator.Result> r : results) {
        Migrator.Result res = r.get();
        assertThat(res.to()).isEqualTo(Migrator.MIGRATIONS.size());
        appliedTotal += res.applied().size();
      }
      assertThat(appliedTotal).isEqualTo(Migrator.MIGRATIONS.size());
      List<Integer> versions = new ArrayList<>();
      for (Row row :
          Database.await(
              dbs.get(0)
                  .pool()
                  .query("SELECT version FROM oneshot.schema_migrations ORDER BY 1")
                  .execute())) {
        versions.add(row.getInteger(0));
      }
      assertThat(versions).hasSize(Migrator.MIGRATIONS.size()).doesNotHaveDuplicates();
      assertThat(Migrator.migrate(dbs.get(1)).applied()).isEmpty();
    } finally {
      pool.shutdownNow();
      dbs.forEach(Database::close);
    }
  }

  /**
   * db/014 moves the launch record out of the build's row: a build launched before the upgrade
   * keeps its launch (time, name, namespace) as the API shows it, and is still launched for the
   * rescuer; one claimed but not launched stays unlaunched.
   */
  @Test
  void anUpgradeKeepsTheLaunchesRecordedBeforeIt() {
    String url = TestDatabase.fresh();
    try (Database db = Database.open(vertx, url, 1, "migrate")) {
      assertThat(Migrator.migrate(db, 13).to()).isEqualTo(13);
      Database.await(
          db.pool()
              .query(
                  """
                  INSERT INTO oneshot.routes (name, position, tags, max_concurrent, max_attempts,
                                              timeout_ms, cancel_grace_ms)
                  VALUES ('a', 0, '{}', 5, 3, 3600000, 60000);
                  INSERT INTO oneshot.builds (route, tags, input, status, attempt, claimed_at,
                                              launch_kind, launch_name, launch_namespace, launched_at)
                  VALUES ('a', '{}', '{}', 'launching', 2, now(), 'kubernetes', 'oneshot-1-2',
                          'builds', '2026-01-02T03:04:05.678Z'),
                         ('a', '{}', '{}', 'launching', 1, now(), 'kubernetes', 'oneshot-2-1',
                          NULL, NULL)""")
              .execute());

      assertThat(Migrator.migrate(db, 15).applied())
          .containsExactly("014_launch_records.sql", "015_launch_removed.sql");
      // Read by today's code, which reads what later migrations add.
      Migrator.migrate(db);

      BuildStore store = new BuildStore(db.pool());
      Build launched = Database.await(store.reads().get(1)).orElseThrow();
      assertThat(launched.launchedAt()).isEqualTo(Instant.parse("2026-01-02T03:04:05.678Z"));
      assertThat(launched.launch().name()).isEqualTo("oneshot-1-2");
      assertThat(launched.launch().namespace()).isEqualTo("builds");
      Build unlaunched = Database.await(store.reads().get(2)).orElseThrow();
      assertThat(unlaunched.launchedAt()).isNull();
      assertThat(Database.await(store.attempts().live()))
          .extracting(AttemptStore.LiveBuild::id, AttemptStore.LiveBuild::launched)
          .containsExactly(tuple(1L, true), tuple(2L, false));
    }
  }

  /**
   * db/016 gives workspaces to routes: each stored version goes to the route of the build that
   * wrote it, so a name two routes shared becomes one workspace on each, with its versions; a state
   * stored afterwards without a route (by a replica of the previous version, mid-upgrade) gets its
   * build's route.
   */
  @Test
  void anUpgradeGivesEachStateVersionTheRouteOfTheBuildThatWroteIt() {
    String url = TestDatabase.fresh();
    try (Database db = Database.open(vertx, url, 1, "migrate")) {
      assertThat(Migrator.migrate(db, 15).to()).isEqualTo(15);
      Database.await(
          db.pool()
              .query(
                  """
                  INSERT INTO oneshot.routes (name, position, tags, max_concurrent, max_attempts,
                                              timeout_ms, cancel_grace_ms)
                  VALUES ('a', 0, '{"team":"a"}', 5, 3, 3600000, 60000),
                         ('b', 1, '{"team":"b"}', 5, 3, 3600000, 60000);
                  INSERT INTO oneshot.builds (route, tags, input, status, workspace, finished_at,
                                              runner_id)
                  VALUES ('a', '{}', '{}', 'succeeded', 'prod', now(), NULL),
                         ('b', '{}', '{}', 'succeeded', 'prod', now(), NULL),
                         ('a', '{}', '{}', 'succeeded', 'prod', now(), NULL),
                         ('b', '{}', '{}', 'running', 'prod', NULL, 'r');
                  INSERT INTO oneshot.workspace_states (workspace, version, build_id, attempt,
                                                        state, bytes, final)
                  VALUES ('prod', 1, 1, 1, '{"serial":1}', 12, true),
                         ('prod', 2, 2, 1, '{"serial":2}', 12, true),
                         ('prod', 3, 3, 1, '{"serial":3}', 12, true)""")
              .execute());

      assertThat(Migrator.migrate(db).applied())
          .startsWith("016_workspaces_by_route.sql")
          .doesNotContain("015_launch_removed.sql");

      BuildStore store = new BuildStore(db.pool());
      assertThat(Database.await(store.state().stateVersions("a", "prod")))
          .extracting(StateStore.StateVersion::version, StateStore.StateVersion::buildId)
          .containsExactly(tuple(3, 3L), tuple(1, 1L));
      assertThat(Database.await(store.state().stateVersions("b", "prod")))
          .extracting(StateStore.StateVersion::version, StateStore.StateVersion::buildId)
          .containsExactly(tuple(2, 2L));
      assertThat(Database.await(store.state().state("b", "prod", null))).contains("{\"serial\":2}");
      // As the previous version stores a state: no route.
      Database.await(
          db.pool()
              .query(
                  "INSERT INTO oneshot.workspace_states (workspace, version, build_id, attempt,"
                      + " state, bytes) VALUES ('prod', 4, 4, 1, '{\"serial\":4}', 12)")
              .execute());
      assertThat(Database.await(store.state().state("b", "prod", null))).contains("{\"serial\":4}");
      assertThat(Database.await(store.state().state("a", "prod", null))).contains("{\"serial\":3}");
    }
  }

  @Test
  void aSchemaNewerThanThisVersionIsRefused() {
    String url = TestDatabase.fresh();
    try (Database db = Database.open(vertx, url, 1, "migrate")) {
      Migrator.migrate(db);
      Database.await(
          db.pool()
              .query("INSERT INTO oneshot.schema_migrations (version, name) VALUES (999, 'future')")
              .execute());
      assertThatThrownBy(() -> Migrator.migrate(db))
          .hasMessage(
              "the database schema is at version 999 but this oneshot knows versions up to "
                  + Migrator.MIGRATIONS.size()
                  + "; run a newer oneshot against this database");
    }
  }

  @Test
  void anAppliedMigrationThatChangedStopsTheStartAndOneWithoutAChecksumGetsIt() {
    String url = TestDatabase.fresh();
    try (Database db = Database.open(vertx, url, 1, "migrate")) {
      Migrator.migrate(db);
      String second = Migrator.MIGRATIONS.get(1);
      Object recorded = checksumOf(db, 2);
      assertThat(recorded).asString().hasSize(64);

      // As if the file had been edited after this database applied it.
      Database.await(
          db.pool()
              .query(
                  "UPDATE oneshot.schema_migrations SET checksum = repeat('ab', 32) WHERE version = 2")
              .execute());
      assertThatThrownBy(() -> Migrator.migrate(db))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageStartingWith(
              "migration 2 ("
                  + second
                  + ") changed after it was applied to this database (SHA-256"
                  + " abababababab… then, ")
          .hasMessageContaining("a change to the schema goes in a new migration");

      // Applied by a version that kept no checksums: it gets the file's, and the start goes on.
      Database.await(
          db.pool()
              .query("UPDATE oneshot.schema_migrations SET checksum = NULL WHERE version = 2")
              .execute());
      Migrator.migrate(db);
      assertThat(checksumOf(db, 2)).isEqualTo(recorded);

      Database.await(
          db.pool()
              .query("UPDATE oneshot.schema_migrations SET name = 'renamed.sql' WHERE version = 3")
              .execute());
      assertThatThrownBy(() -> Migrator.migrate(db))
          .hasMessage(
              "migration 3 was applied to this database as renamed.sql but this oneshot has "
                  + Migrator.MIGRATIONS.get(2)
                  + " in its place; migrations are never renamed or reordered once applied");
    }
  }

  private static Object checksumOf(Database db, int version) {
    return Database.await(
            db.pool()
                .preparedQuery("SELECT checksum FROM oneshot.schema_migrations WHERE version = $1")
                .execute(io.vertx.sqlclient.Tuple.of(version)))
        .iterator()
        .next()
        .getValue(0);
  }
}
