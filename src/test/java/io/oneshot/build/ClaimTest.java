package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.testing.Limits;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The claim statement: exactly once, in order, and never past a limit. */
class ClaimTest {
  private static final String SCRIPT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";

  private StoreFixture f;

  @AfterEach
  void tearDown() {
    if (f != null) {
      f.close();
    }
    Limits.untrack();
  }

  private List<Long> claim(BuildStore store, int global, int batch) {
    return Database.await(store.queue().claim(global, "test", StoreFixture.tokens(batch))).stream()
        .map(QueueStore.Claimed::id)
        .sorted()
        .toList();
  }

  private long enqueue(String tags, int priority, String workspace) {
    return Database.await(f.store.queue().enqueue(tags, SCRIPT, priority, workspace)).id();
  }

  private void finish(long id) {
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'failed', finished_at = now(), reason = 'test'"
            + " WHERE id = ?",
        id);
  }

  @Test
  void claimsByPriorityThenAge() {
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 2}\n");
    long p0a = enqueue("{}", 0, null);
    long p5a = enqueue("{}", 5, null);
    enqueue("{}", 0, null);
    long p5b = enqueue("{}", 5, null);
    long p1 = enqueue("{}", 1, null);
    assertThat(claim(f.store, 100, 10)).containsExactly(p5a, p5b);
    assertThat(claim(f.store, 100, 10)).isEmpty();
    finish(p5a);
    finish(p5b);
    assertThat(claim(f.store, 100, 10)).containsExactly(p0a, p1);
  }

  @Test
  void aClaimLocksNoMoreBuildsThanItTakesHoweverDeepTheQueue() {
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 1000}\n");
    // Written as one statement, so that no row is locked by what writes the next (an enqueue
    // takes its route's row and its workspace's into account under locks of its own).
    Sql.exec(
        "INSERT INTO oneshot.builds (route, tags, input)"
            + " SELECT 'a', '{}', ?::jsonb FROM generate_series(1, 30)",
        SCRIPT);
    List<Long> ids =
        Sql.rows("SELECT id FROM oneshot.builds ORDER BY id").stream()
            .map(r -> ((Number) r.get("id")).longValue())
            .toList();
    List<QueueStore.Claimed> c =
        Database.await(f.store.queue().claim(1000, "test", StoreFixture.tokens(2)));
    assertThat(c).extracting(QueueStore.Claimed::id).containsExactly(ids.get(0), ids.get(1));
    // A row a transaction locked keeps that transaction's id as its xmax after the commit; the
    // queued builds were written fresh, so any other than 0 is one the claim locked. (Looking
    // from another connection while the claim's transaction is open would race its COMMIT, which
    // is sent together with the claim.)
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.builds WHERE status = 'pending'"
                    + " AND xmax::text <> '0'"))
        .isZero();
  }

  @Test
  void aClaimAnswersItsBuildsInTheOrderTheyLaunchWhateverOrderTheyWereWritten() {
    // Priorities rise with the id, so the table's order and the launch order disagree; two routes,
    // so that the claim's rows come from two scans. The dispatcher starts its launches in the
    // order the claim answers: the most urgent build's Job goes out first.
    f =
        new StoreFixture(
            "routes:\n"
                + "  - {name: a, maxConcurrent: 50, tags: {team: a}}\n"
                + "  - {name: b, maxConcurrent: 50, tags: {team: b}}\n");
    List<Long> expected = new ArrayList<>();
    List<long[]> written = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      String team = i % 2 == 0 ? "a" : "b";
      written.add(new long[] {enqueue("{\"team\": \"" + team + "\"}", i / 3, null), i / 3});
    }
    written.stream()
        .sorted((x, y) -> x[1] != y[1] ? Long.compare(y[1], x[1]) : Long.compare(x[0], y[0]))
        .forEach(w -> expected.add(w[0]));
    assertThat(claim(f.store, 100, StoreFixture.tokens(40))).containsExactlyElementsOf(expected);
  }

  @Test
  void aClaimRecordsAttemptLaunchNameAndTokenHash() {
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 2}\n");
    long id = enqueue("{}", 0, null);
    List<BuildToken> t = StoreFixture.tokens(3);
    List<QueueStore.Claimed> c = Database.await(f.store.queue().claim(10, "test", t));
    assertThat(c).hasSize(1);
    assertThat(c.get(0).attempt()).isEqualTo(1);
    assertThat(c.get(0).launchName()).isEqualTo("oneshot-" + id + "-1");
    Map<String, Object> row =
        Sql.rows("SELECT status, attempt, launch_name, token_hash FROM oneshot.builds").get(0);
    assertThat(row.get("status")).isEqualTo("launching");
    assertThat((byte[]) row.get("token_hash")).isEqualTo(c.get(0).token().hash());
  }

  @Test
  void aTokenSentUnusedByEarlierClaimsIsStoredWholeWhenALaterClaimTakesIt() {
    // The dispatcher keeps the tokens a claim left unused, hashes made, and sends them again.
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 10}\n");
    List<QueueStore.ClaimToken> kept = new ArrayList<>(StoreFixture.claimTokens(3));
    for (int round = 0; round < 3; round++) {
      long id = enqueue("{}", 0, null);
      List<QueueStore.Claimed> c =
          Database.await(f.store.queue().claim(10, "test", kept, null, x -> {}));
      assertThat(c).extracting(QueueStore.Claimed::id).containsExactly(id);
      BuildToken used = c.get(0).token();
      assertThat(used).isSameAs(kept.get(0).token());
      byte[] stored =
          (byte[])
              Sql.rows("SELECT token_hash FROM oneshot.builds WHERE id = ?", id)
                  .get(0)
                  .get("token_hash");
      assertThat(stored).as("round %d", round).isEqualTo(BuildToken.hash(used.value()));
      kept.remove(0);
    }
  }

  @Test
  void theGlobalLimitCapsAllRoutes() {
    f =
        new StoreFixture(
            "routes:\n  - {name: a, tags: {t: a}, maxConcurrent: 5}\n"
                + "  - {name: b, tags: {t: b}, maxConcurrent: 5}\n");
    for (int i = 0; i < 4; i++) {
      enqueue("{\"t\": \"a\"}", 0, null);
      enqueue("{\"t\": \"b\"}", 0, null);
    }
    assertThat(claim(f.store, 3, 10)).hasSize(3);
    assertThat(claim(f.store, 3, 10)).isEmpty();
    assertThat(claim(f.store, 5, 10)).hasSize(2);
  }

  @Test
  void aWorkspaceRunsItsBuildsOneAtATimeInEnqueueOrder() {
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 10}\n");
    long w1 = enqueue("{}", 0, "ws");
    long w2 = enqueue("{}", 9, "ws");
    long other = enqueue("{}", 0, "other");
    long w3 = enqueue("{}", 0, "ws");
    long free = enqueue("{}", 0, null);
    assertThat(claim(f.store, 100, 10)).containsExactly(w1, other, free);
    assertThat(claim(f.store, 100, 10)).isEmpty();
    finish(w1);
    assertThat(claim(f.store, 100, 10)).containsExactly(w2);
    finish(w2);
    assertThat(claim(f.store, 100, 10)).containsExactly(w3);
  }

  /** A workspace is its route's: the same name on two routes is two workspaces, each serial. */
  @Test
  void aWorkspaceNameOnTwoRoutesIsTwoWorkspaces() {
    f =
        new StoreFixture(
            "routes:\n  - {name: a, tags: {team: a}, maxConcurrent: 10}\n"
                + "  - {name: b, tags: {team: b}, maxConcurrent: 10}\n");
    long a1 = enqueue("{\"team\": \"a\"}", 0, "prod");
    long b1 = enqueue("{\"team\": \"b\"}", 0, "prod");
    long a2 = enqueue("{\"team\": \"a\"}", 0, "prod");
    long b2 = enqueue("{\"team\": \"b\"}", 0, "prod");
    assertThat(claim(f.store, 100, 10)).containsExactly(a1, b1);
    finish(b1);
    assertThat(claim(f.store, 100, 10)).containsExactly(b2);
    finish(a1);
    assertThat(claim(f.store, 100, 10)).containsExactly(a2);
  }

  @Test
  void twoClaimersRacingClaimEachBuildOnce() throws Exception {
    String routes = "routes:\n  - {name: a, maxConcurrent: 100000}\n";
    f = new StoreFixture(routes);
    StoreFixture other = new StoreFixture(routes, false);
    Sql.exec("SELECT oneshot.enqueue('{}', ?::jsonb) FROM generate_series(1, 600)", SCRIPT);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<List<Long>>> results = new ArrayList<>();
      for (BuildStore s : List.of(f.store, other.store)) {
        results.add(
            pool.submit(
                () -> {
                  List<Long> mine = new ArrayList<>();
                  while (true) {
                    List<Long> got = claim(s, 100000, 7);
                    if (got.isEmpty()) {
                      return mine;
                    }
                    mine.addAll(got);
                  }
                }));
      }
      List<Long> a = results.get(0).get(60, TimeUnit.SECONDS);
      List<Long> b = results.get(1).get(60, TimeUnit.SECONDS);
      assertThat(a).isNotEmpty();
      assertThat(b).isNotEmpty();
      List<Long> all = new ArrayList<>(a);
      all.addAll(b);
      assertThat(all).hasSize(600).doesNotHaveDuplicates();
      assertThat(
              Sql.count(
                  "SELECT count(*) FROM oneshot.build_events"
                      + " WHERE from_status = 'pending' AND to_status = 'launching'"))
          .isEqualTo(600);
      assertThat(
              Sql.count(
                  "SELECT count(*) FROM oneshot.builds WHERE status = 'launching' AND attempt = 1"))
          .isEqualTo(600);
    } finally {
      pool.shutdownNow();
      other.close();
    }
  }

  /**
   * Many concurrent claim cycles, with builds finishing and being requeued meanwhile, never take a
   * route, the whole system or a workspace past its limit. Checked from the event table.
   */
  @Test
  void concurrentCyclesNeverExceedAnyLimit() throws Exception {
    String routes =
        """
        routes:
          - {name: a, tags: {t: a}, untagged: true, maxConcurrent: 3}
          - {name: b, tags: {t: b}, maxConcurrent: 2}
          - {name: c, tags: {t: c}, maxConcurrent: 4}
        """;
    f = new StoreFixture(routes);
    Limits.track();
    int global = 6;
    int n = 240;
    for (int i = 0; i < n; i++) {
      String t = "abc".substring(i % 3, i % 3 + 1);
      String ws = i % 4 == 0 ? "ws" + (i % 5) : null;
      enqueue("{\"t\": \"" + t + "\"}", ThreadLocalRandom.current().nextInt(3), ws);
    }
    List<StoreFixture> claimers = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      claimers.add(new StoreFixture(routes, false));
    }
    BlockingQueue<QueueStore.Claimed> claimed = new LinkedBlockingQueue<>();
    AtomicBoolean done = new AtomicBoolean();
    Map<Long, Integer> requeued = new ConcurrentHashMap<>();
    ExecutorService pool = Executors.newFixedThreadPool(9);
    try {
      List<Future<?>> tasks = new ArrayList<>();
      for (StoreFixture c : claimers) {
        for (int k = 0; k < 2; k++) {
          tasks.add(
              pool.submit(
                  () -> {
                    while (!done.get()) {
                      claimed.addAll(
                          Database.await(
                              c.store.queue().claim(global, "test", StoreFixture.tokens(5))));
                    }
                    return null;
                  }));
        }
      }
      // Nothing finishes until the claimers have filled the global limit, so the limit is reached
      // whatever the scheduling; from then on claims and finishes race.
      await().atMost(1, TimeUnit.MINUTES).until(() -> claimed.size() >= global);
      for (int k = 0; k < 3; k++) {
        tasks.add(
            pool.submit(
                () -> {
                  while (!done.get()) {
                    QueueStore.Claimed c = claimed.poll(100, TimeUnit.MILLISECONDS);
                    if (c == null) {
                      continue;
                    }
                    if (ThreadLocalRandom.current().nextInt(10) == 0
                        && requeued.putIfAbsent(c.id(), 1) == null) {
                      Database.await(
                          f.store
                              .attempts()
                              .requeue(c.id(), c.attempt(), BuildState.LAUNCHING, "test"));
                    } else {
                      Database.await(
                          f.store
                              .attempts()
                              .finish(
                                  c.id(),
                                  c.attempt(),
                                  BuildState.LAUNCHING,
                                  BuildState.FAILED,
                                  "done"));
                    }
                  }
                  return null;
                }));
      }
      await()
          .atMost(2, TimeUnit.MINUTES)
          .until(
              () ->
                  Sql.count("SELECT count(*) FROM oneshot.builds WHERE finished_at IS NULL") == 0);
      done.set(true);
      for (Future<?> t : tasks) {
        t.get(30, TimeUnit.SECONDS);
      }
    } finally {
      done.set(true);
      pool.shutdownNow();
      claimers.forEach(StoreFixture::close);
    }

    assertThat(requeued).isNotEmpty();
    Map<String, Integer> max = Limits.maxConcurrency();
    assertThat(max.get("global")).isLessThanOrEqualTo(global);
    assertThat(max.getOrDefault("route:a", 0)).isLessThanOrEqualTo(3);
    assertThat(max.getOrDefault("route:b", 0)).isLessThanOrEqualTo(2);
    assertThat(max.getOrDefault("route:c", 0)).isLessThanOrEqualTo(4);
    max.forEach(
        (k, v) -> {
          if (k.startsWith("ws:")) {
            assertThat(v).as(k).isLessThanOrEqualTo(1);
          }
        });
    assertThat(max.get("global"))
        .as("the global limit was reached before anything finished, so it was tested")
        .isEqualTo(global);
  }

  /**
   * The fence: a claim names the leadership session it was made under and commits only while that
   * session holds the leader lock. A replica whose session ended, or whose lock another replica now
   * holds, claims nothing, even if it has not noticed yet; nor does it try a launch again.
   */
  @Test
  void aDeposedLeaderCannotClaimNorTryALaunch() {
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 10}\n");
    long first = enqueue("{}", 0, null);
    io.oneshot.dispatch.Leadership a =
        new io.oneshot.dispatch.Leadership(
            f.vertx, f.db.connectOptions("leader-a"), java.time.Duration.ofMillis(100), x -> {});
    io.oneshot.dispatch.Leadership b =
        new io.oneshot.dispatch.Leadership(
            f.vertx, f.db.connectOptions("leader-b"), java.time.Duration.ofMillis(100), x -> {});
    try {
      a.start();
      await().atMost(10, TimeUnit.SECONDS).until(a::isLeader);
      b.start();
      LeaderFence fenceA = a.fence();
      assertThat(fenceA).isNotNull();
      assertThat(b.fence()).as("b does not lead").isNull();
      assertThat(
              Database.await(
                  f.store.queue().claim(10, "test", StoreFixture.claimTokens(5), fenceA, c -> {})))
          .extracting(QueueStore.Claimed::id)
          .containsExactly(first);
      assertThat(Database.await(f.store.attempts().launchTry(first, 1, "try 2", fenceA))).isTrue();

      // A's lock session ends (as when its replica is partitioned or killed); B takes the lock.
      long second = enqueue("{}", 0, null);
      Sql.exec("SELECT pg_terminate_backend(?)", fenceA.pid());
      await().atMost(10, TimeUnit.SECONDS).until(() -> b.isLeader());
      assertThat(b.fence()).isNotEqualTo(fenceA);

      // A claims with the fence it had: refused, and nothing is claimed.
      assertThatFencedOut(fenceA);
      // Nor may it try its launch again; the leader that replaced it may.
      assertThat(Database.await(f.store.attempts().launchTry(first, 1, "try 3", fenceA))).isFalse();
      assertThat(Database.await(f.store.attempts().launchTry(first, 1, "try 3", b.fence())))
          .isTrue();
      // Nor does a fence of a live session that does not hold the lock pass.
      int someSession = ((Number) Sql.value("SELECT pg_backend_pid()")).intValue();
      assertThatFencedOut(
          new LeaderFence(someSession, java.time.OffsetDateTime.now(java.time.ZoneOffset.UTC)));
      // Nor does the leader's own pid under another session start: what a fence shows when its
      // session died and a new session got the same pid.
      LeaderFence fenceB = b.fence();
      LeaderFence pidReused = new LeaderFence(fenceB.pid(), fenceB.sessionStart().minusSeconds(1));
      assertThatFencedOut(pidReused);
      assertThat(Database.await(f.store.attempts().launchTry(first, 1, "try 4", fenceB)))
          .as("the fence that holds still lets a launch be tried")
          .isTrue();
      assertThat(Database.await(f.store.attempts().launchTry(first, 1, "try 5", pidReused)))
          .as("the leader's pid under another session start tries no launch")
          .isFalse();
      assertThat(Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", second))
          .isEqualTo("pending");

      assertThat(
              Database.await(
                  f.store
                      .queue()
                      .claim(10, "test", StoreFixture.claimTokens(5), b.fence(), c -> {})))
          .extracting(QueueStore.Claimed::id)
          .containsExactly(second);
    } finally {
      a.close();
      b.close();
    }
  }

  /**
   * The claim goes out with its BEGIN and COMMIT in one round trip: when its statement fails, the
   * COMMIT sent behind it rolls the transaction back, the caller hears the statement's own error,
   * and the connection goes back to the pool clean.
   */
  @Test
  void aClaimWhoseStatementFailsClaimsNothingAndLeavesItsConnectionClean() {
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 10}\n");
    long first = enqueue("{}", 0, null);
    List<BuildToken> tokens = StoreFixture.tokens(1);
    assertThat(claim(f.store, 10, tokens)).containsExactly(first);
    long second = enqueue("{}", 0, null);
    // The same token again: its hash is unique, so the claim's update fails.
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> claim(f.store, 10, tokens))
        .isInstanceOf(io.vertx.pgclient.PgException.class)
        .hasMessageContaining("builds_token_hash_key");
    assertThat(Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", second))
        .isEqualTo("pending");
    assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", second)).isEqualTo(0);
    // Every connection of the pool still claims: none was left inside the failed transaction.
    for (int i = 0; i < 20; i++) {
      assertThat(claim(f.store, 10, StoreFixture.tokens(1))).isSubsetOf(List.of(second));
    }
    assertThat(Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", second))
        .isEqualTo("launching");
  }

  private List<Long> claim(BuildStore store, int global, List<BuildToken> tokens) {
    return Database.await(store.queue().claim(global, "test", tokens)).stream()
        .map(QueueStore.Claimed::id)
        .toList();
  }

  /**
   * The claim is prepared once per connection and planned from its cached plan afterwards: a
   * statement text the client would not cache is parsed and planned again on every call.
   */
  @Test
  void theClaimIsPreparedOncePerConnection() {
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 10}\n");
    Database one = Database.open(f.vertx, io.oneshot.testing.TestDatabase.url(), 1, "test-one");
    try {
      BuildStore store = new BuildStore(one.pool());
      enqueue("{}", 0, null);
      for (int i = 0; i < 3; i++) {
        Database.await(store.queue().claim(10, "test", StoreFixture.tokens(4)));
      }
      List<String> prepared =
          Database.await(one.pool().query("SELECT statement FROM pg_prepared_statements").execute())
              .stream()
              .map(r -> r.getString(0))
              .toList();
      assertThat(prepared).anyMatch(s -> s.contains("FOR UPDATE OF b SKIP LOCKED"));
      assertThat(prepared).anyMatch(s -> s.contains("pg_advisory_xact_lock"));
    } finally {
      one.close();
    }
  }

  private void assertThatFencedOut(LeaderFence stale) {
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () ->
                Database.await(
                    f.store.queue().claim(10, "test", StoreFixture.claimTokens(5), stale, c -> {})))
        .isInstanceOf(FencedOutException.class)
        .hasMessageContaining("does not lead");
  }
}
