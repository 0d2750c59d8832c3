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

      assertThat(Migrator.migrate(db).applied())
          .containsExactly("014_launch_records.sql", "015_launch_removed.sql");

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
