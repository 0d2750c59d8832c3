package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.StoreFixture;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Statements that touch a batch of builds by id or token keep a plan that costs what the batch
 * holds, even when the table's statistics were taken before a burst made thousands of builds live:
 * at 9:00 the night's ANALYZE has seen none launching, so an estimate from a status index says a
 * handful. A bitmap scan of a status index then reads every version of every live build left since
 * the last vacuum, since it never marks an index entry dead as a plain index scan does.
 */
class StalePlanTest {
  private StoreFixture f;

  @AfterEach
  void close() {
    if (f != null) {
      f.close();
    }
  }

  /**
   * A connection plans the claim once and keeps the plan: planning it on every call cost more than
   * running it (QueueStore#CLAIM_BEGIN), and PostgreSQL's own choice, by estimated cost, planned
   * every claim anew over 50 routes and a deep queue.
   */
  @Test
  void aConnectionPlansTheClaimOnceAndKeepsThePlan() {
    f = new StoreFixture("routes: [{name: a, maxConcurrent: 100000}]");
    f.enqueueNoops(20);
    Database one = Database.open(f.vertx, io.oneshot.testing.TestDatabase.url(), 1, "test");
    try {
      BuildStore store = new BuildStore(one.pool());
      for (int i = 0; i < 8; i++) {
        assertThat(Database.await(store.queue().claim(100, "test", StoreFixture.tokens(1))))
            .hasSize(1);
      }
      io.vertx.sqlclient.Row plans =
          Database.await(
                  one.pool()
                      .query(
                          "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                              + " WHERE statement LIKE '%claimed AS (%'")
                      .execute())
              .iterator()
              .next();
      assertThat(plans.getLong("custom_plans")).isZero();
      assertThat(plans.getLong("generic_plans")).isEqualTo(8);
    } finally {
      one.close();
    }
  }

  @Test
  void theLaunchRecordFindsItsBuildsByPrimaryKeyWhenTheStatisticsPredateTheBurst()
      throws Exception {
    f = new StoreFixture("routes: [{name: a, maxConcurrent: 100000}]");
    f.enqueueNoops(3_000);
    io.oneshot.testing.Sql.exec("ANALYZE oneshot.builds");
    // The burst: 2,000 claimed after the statistics were taken, none of them recorded yet.
    assertThat(f.claim(100_000, 2_000, "noop")).hasSize(2_000);

    // The plan finds the builds by primary key, and the statement still records exactly the
    // launches it was given.
    planAndRun(
        Sql.load("attempts/mark-launched").text(),
        "BEGIN",
        "(ARRAY[10, 20, 30, 40, 50, 60]::bigint[], ARRAY[1, 1, 1, 1, 1, 1],"
            + " ARRAY['noop', 'noop', 'noop', 'noop', 'noop', 'noop'],"
            + " ARRAY['a', 'b', 'c', 'd', 'e', 'f'], ARRAY[NULL, NULL, NULL, NULL, NULL, NULL],"
            + " ARRAY['x', 'x', 'x', 'x', 'x', 'x'])",
        6,
        (mode, plan) ->
            assertThat(plan)
                .as(mode)
                .contains("\"builds_pkey\"")
                .doesNotContain("\"builds_live\""));
  }

  /**
   * A burst's launch records come 50 to 200 at once. The planner takes each of the statement's own
   * results for a row or ten, and where two of them were joined it joined them in a nested loop,
   * each row of one against every row of the other: 49 ms of a 54 ms record of 172 launches.
   */
  @Test
  void aBurstsLaunchRecordJoinsNoneOfItsOwnResultsRowAgainstRow() throws Exception {
    f = new StoreFixture("routes: [{name: a, maxConcurrent: 100000}]");
    f.enqueueNoops(3_000);
    io.oneshot.testing.Sql.exec("ANALYZE oneshot.builds");
    List<QueueStore.Claimed> claimed = f.claim(100_000, 2_000, "noop");
    List<QueueStore.Claimed> batch = claimed.subList(100, 300);
    int n = batch.size();
    String args =
        "("
            + batch.stream()
                .map(c -> Long.toString(c.id()))
                .collect(Collectors.joining(", ", "ARRAY[", "]::bigint[]"))
            + ", "
            + batch.stream()
                .map(c -> Integer.toString(c.attempt()))
                .collect(Collectors.joining(", ", "ARRAY[", "]"))
            + ", "
            + texts("'noop'", n)
            + ", "
            + batch.stream()
                .map(c -> "'" + c.launchName() + "'")
                .collect(Collectors.joining(", ", "ARRAY[", "]::text[]"))
            + ", "
            + texts("NULL", n)
            + ", "
            + texts("'launched'", n)
            + ")";
    // Every launch recorded, none held: the answer has a row for each.
    planAndRun(
        Sql.load("attempts/mark-launched").text(),
        "BEGIN",
        args,
        n,
        (mode, plan) ->
            assertThat(rowsTouched(plan))
                .as(mode + ": rows the plan's nodes returned or dropped, for a record of " + n)
                .isLessThan(50L * n));
  }

  /**
   * The rescuer reads every live build with its launch record a few times a second while builds
   * end. The records of every build still kept (retention) stay in build_launches; with statistics
   * that counted many builds live (taken in a burst), the read was planned as a hash join over all
   * of them: in the drain, each pass scanned 15,758 records for the 1 to 45 builds live, 5 to 15 ms
   * a pass and 8% of PostgreSQL's CPU, growing with the history. Each live build now looks up its
   * own record.
   */
  @Test
  void theRescuersReadCostsTheLiveBuildsNotTheHistory() throws Exception {
    f = new StoreFixture("routes: [{name: a, maxConcurrent: 100000}]");
    f.enqueueNoops(6_020);
    // The statistics are taken in a burst (autovacuum analyzes a table once enough of it changed),
    // with half the builds launching; then the burst ends: 6,000 builds launched and ended.
    f.claim(100_000, 3_000, "noop");
    io.oneshot.testing.Sql.exec("ANALYZE oneshot.builds, oneshot.build_launches");
    f.claim(100_000, 3_000, "noop");
    io.oneshot.testing.Sql.exec(
        "INSERT INTO oneshot.build_launches (build_id, attempt, kind, name)"
            + " SELECT id, attempt, 'noop', launch_name FROM oneshot.builds"
            + " WHERE status = 'launching'");
    io.oneshot.testing.Sql.exec(
        "UPDATE oneshot.builds SET status = 'running', runner_id = 'r', started_at = now()"
            + " WHERE status = 'launching'");
    io.oneshot.testing.Sql.exec(
        "UPDATE oneshot.builds SET status = 'succeeded', finished_at = now()"
            + " WHERE status = 'running'");
    // The live ones: 20 launching, half of them launched.
    List<QueueStore.Claimed> live = f.claim(100_000, 20, "noop");
    assertThat(live).hasSize(20);
    io.oneshot.testing.Sql.exec(
        "INSERT INTO oneshot.build_launches (build_id, attempt, kind, name)"
            + " SELECT id, attempt, 'noop', launch_name FROM oneshot.builds"
            + " WHERE status = 'launching' ORDER BY id LIMIT 10");

    planAndRun(
        Sql.load("attempts/live").text(),
        "BEGIN",
        "",
        live.size(),
        (mode, plan) ->
            assertThat(rowsTouched(plan))
                .as(mode + ": rows the plan's nodes returned or dropped, for 20 live builds")
                .isLessThan(50L * live.size()));
    // Each live build comes with its own record, or none.
    try (Connection c = io.oneshot.testing.Sql.connect();
        Statement s = c.createStatement();
        ResultSet r = s.executeQuery(Sql.load("attempts/live").text())) {
      int launched = 0;
      while (r.next()) {
        if (r.getBoolean("launched")) {
          launched++;
          assertThat(r.getString("launch_kind")).isEqualTo("noop");
        }
      }
      assertThat(launched).isEqualTo(10);
    }
  }

  /**
   * Every row each node of an EXPLAIN ANALYZE plan (JSON) returned or dropped by a filter, over all
   * its loops: a node run once per row of another shows here as the product of the two.
   */
  private static long rowsTouched(String plan) {
    long total = 0;
    java.util.ArrayDeque<com.fasterxml.jackson.databind.JsonNode> nodes =
        new java.util.ArrayDeque<>();
    try {
      nodes.add(
          new com.fasterxml.jackson.databind.ObjectMapper().readTree(plan).get(0).get("Plan"));
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("not an EXPLAIN (FORMAT JSON) plan: " + plan, e);
    }
    while (!nodes.isEmpty()) {
      com.fasterxml.jackson.databind.JsonNode n = nodes.poll();
      double perLoop =
          n.path("Actual Rows").asDouble()
              + n.path("Rows Removed by Filter").asDouble()
              + n.path("Rows Removed by Join Filter").asDouble();
      total += Math.round(perLoop * n.path("Actual Loops").asDouble());
      n.path("Plans").forEach(nodes::add);
    }
    return total;
  }

  /**
   * 3,000 builds analyzed with 100 of them launching (a few live, as the night's statistics say),
   * then 2,000 claimed in all, and 1,000 of those running.
   */
  private List<QueueStore.Claimed> burstAfterTheStatistics() {
    f = new StoreFixture("routes: [{name: a, maxConcurrent: 100000}]");
    f.enqueueNoops(3_000);
    List<QueueStore.Claimed> claimed = new java.util.ArrayList<>(f.claim(100_000, 100, "noop"));
    io.oneshot.testing.Sql.exec("ANALYZE oneshot.builds");
    claimed.addAll(f.claim(100_000, 1_900, "noop"));
    assertThat(claimed).hasSize(2_000);
    String running =
        claimed.subList(0, 1_000).stream()
            .map(c -> Long.toString(c.id()))
            .collect(Collectors.joining(","));
    io.oneshot.testing.Sql.exec(
        "UPDATE oneshot.builds SET status = 'running', runner_id = 'r', started_at = now()"
            + " WHERE id IN ("
            + running
            + ")");
    return claimed;
  }

  private static String tokens(List<QueueStore.Claimed> builds) {
    return hashes(builds.stream().map(QueueStore.Claimed::token).toList());
  }

  private static String hashes(List<BuildToken> tokens) {
    return tokens.stream()
        .map(t -> io.oneshot.testing.Sql.bytea(t.hash()))
        .collect(Collectors.joining(", ", "ARRAY[", "]"));
  }

  private static String texts(String value, int n) {
    return "ARRAY[" + String.join(", ", java.util.Collections.nCopies(n, value)) + "]::text[]";
  }

  /**
   * Prepares {@code text}, then for a custom and a generic plan: explains it with {@code args},
   * analyzed (after {@code begin}, in its transaction, rolled back), and checks the plan (given the
   * plan mode and the plan), then runs it again after {@code begin} and counts its rows, rolled
   * back too.
   */
  private static void planAndRun(
      String text,
      String begin,
      String args,
      int rows,
      java.util.function.BiConsumer<String, String> check)
      throws Exception {
    try (Connection c = io.oneshot.testing.Sql.connect();
        Statement s = c.createStatement()) {
      s.execute("PREPARE under_test AS " + text);
      for (String mode : new String[] {"force_custom_plan", "force_generic_plan"}) {
        s.execute(begin);
        s.execute("SET LOCAL plan_cache_mode = " + mode);
        String plan;
        try (ResultSet r =
            s.executeQuery("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE under_test" + args)) {
          r.next();
          plan = r.getString(1);
        }
        s.execute("ROLLBACK");
        check.accept(mode, plan);
        s.execute(begin);
        s.execute("SET LOCAL plan_cache_mode = " + mode);
        try (ResultSet r = s.executeQuery("EXECUTE under_test" + args)) {
          int n = 0;
          while (r.next()) {
            n++;
          }
          assertThat(n).as(mode).isEqualTo(rows);
        }
        s.execute("ROLLBACK");
      }
    }
  }

  @Test
  void runnersCallsWrittenTogetherFindTheirBuildsByTokenWhenTheStatisticsPredateTheBurst()
      throws Exception {
    List<QueueStore.Claimed> claimed = burstAfterTheStatistics();
    List<QueueStore.Claimed> launching = claimed.subList(1_500, 1_506);
    List<QueueStore.Claimed> running = claimed.subList(500, 506);
    java.util.function.BiConsumer<String, String> byToken =
        (mode, plan) ->
            assertThat(plan)
                .as(mode)
                .contains("\"builds_token_hash_key\"")
                .doesNotContain("Bitmap")
                .doesNotContain("\"builds_live\"")
                .doesNotContain("\"builds_status\"");

    planAndRun(
        Sql.load("runner/acquire-many").text(),
        "BEGIN",
        "("
            + tokens(launching)
            + ", "
            + texts("'r2'", 6)
            + ", "
            + texts("'{}'", 6)
            + ", '1s', ARRAY[NULL, NULL, NULL, NULL, NULL, NULL]::bigint[],"
            + " ARRAY[NULL, NULL, NULL, NULL, NULL, NULL]::int[])",
        6,
        byToken);
    planAndRun(
        Sql.load("runner/complete-many").text(),
        "BEGIN",
        "("
            + tokens(running)
            + ", "
            + texts("'succeeded'", 6)
            + ", ARRAY[0, 0, 0, 0, 0, 0], "
            + texts("NULL", 6)
            + ", "
            + texts("'{}'", 6)
            + ", "
            + texts("'done'", 6)
            + ", "
            + texts("'r'", 6)
            + ", '1s', "
            + texts("NULL", 6)
            + ")",
        6,
        byToken);
    planAndRun(
        Sql.load("runner/heartbeat-many").text(),
        "BEGIN",
        "(" + tokens(running) + ", " + texts("'r'", 6) + ", '1s')",
        6,
        byToken);
  }

  /**
   * The claim's generic plan, made while the table was small (a new install, or the first claims
   * after a quiet night) and kept by the connection as the queue grows, still finds the builds it
   * updates by primary key: joined by hash to a scan of the whole table, every claim read every
   * build (2.8 ms of a 4.9 ms claim over 10,000 builds in the drain).
   */
  @Test
  void theClaimKeepsFindingItsBuildsByPrimaryKeyWithAPlanMadeOnASmallTable() throws Exception {
    f = new StoreFixture("routes: [{name: a, maxConcurrent: 100000}]");
    f.enqueueNoops(20);
    planAndRun(
        Sql.load("queue/claim").with(Map.of("batch", 100)),
        QueueStore.CLAIM_BEGIN,
        "(100000, " + hashes(StoreFixture.tokens(100)) + ", 'noop')",
        20,
        (mode, plan) ->
            assertThat(plan)
                .as(mode)
                .contains("\"builds_pkey\"")
                .doesNotContainPattern(
                    "\"Node Type\": \"Seq Scan\",[^}]*\"Relation Name\": \"builds\""));
  }
}
