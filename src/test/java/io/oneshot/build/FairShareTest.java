package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.config.OneshotConfig;
import io.oneshot.testing.Limits;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Fair share in the claim (queue/claim.sql, db/019_fair_share.sql): contended slots go to teams by
 * weight counting what each runs, guarantees are kept free, borrowing stops at borrowLimit, a
 * team's cap holds across its routes, and a held route or team is skipped with its builds kept.
 */
class FairShareTest {
  private static final String SCRIPT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";

  private StoreFixture f;

  @AfterEach
  void tearDown() {
    if (f != null) {
      f.close();
    }
    Limits.untrack();
  }

  /** Three teams of one route each (tags {team: a|b|c}) with the given team settings. */
  private static String threeTeams(String a, String b, String c) {
    return "teams:\n"
        + "  - {name: ta, "
        + a
        + "}\n"
        + "  - {name: tb, "
        + b
        + "}\n"
        + "  - {name: tc, "
        + c
        + "}\n"
        + "routes:\n"
        + "  - {name: a, tags: {team: a}, team: ta, maxConcurrent: 1000}\n"
        + "  - {name: b, tags: {team: b}, team: tb, maxConcurrent: 1000}\n"
        + "  - {name: c, tags: {team: c}, team: tc, maxConcurrent: 1000}\n";
  }

  private void flood(String team, int n) {
    Sql.exec(
        "INSERT INTO oneshot.builds (route, tags, input) SELECT ?, ?::jsonb, ?::jsonb"
            + " FROM generate_series(1, ?)",
        team,
        "{\"team\": \"" + team + "\"}",
        SCRIPT,
        n);
  }

  private long enqueue(String team, int priority) {
    return Database.await(
            f.store.queue().enqueue("{\"team\": \"" + team + "\"}", SCRIPT, priority, null))
        .id();
  }

  private List<QueueStore.Claimed> claim(int global, int batch) {
    return Database.await(f.store.queue().claim(global, "test", StoreFixture.tokens(batch)));
  }

  /** Live builds (launching or running) per route. */
  private static Map<String, Long> live() {
    Map<String, Long> out = new TreeMap<>();
    for (Map<String, Object> r :
        Sql.rows(
            "SELECT route, count(*) AS n FROM oneshot.builds"
                + " WHERE status IN ('launching', 'running') GROUP BY route")) {
      out.put((String) r.get("route"), ((Number) r.get("n")).longValue());
    }
    return out;
  }

  private static void finish(String route, int n) {
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'failed', finished_at = now(), reason = 'test' WHERE id IN ("
            + " SELECT id FROM oneshot.builds WHERE route = ? AND status = 'launching'"
            + " ORDER BY id LIMIT ?)",
        route,
        n);
  }

  @Test
  void aContendedGlobalLimitIsSharedByWeight() {
    f = new StoreFixture(threeTeams("weight: 1", "weight: 2", "weight: 1"));
    flood("a", 100);
    flood("b", 100);
    flood("c", 100);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 10L, "b", 20L, "c", 10L));
  }

  @Test
  void theSharesCountWhatEachTeamRunsAlready() {
    f = new StoreFixture(threeTeams("weight: 1", "weight: 2", "weight: 1"));
    // Team a alone takes the whole limit: nobody else wants a slot.
    flood("a", 100);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 40L));
    // Then b and c flood; 10 of a's end. a runs 30, past its share of 10: the 10 free slots go to
    // b and c by weight (costs b 0.5, 1, ..., c 1, 2, ...: b 7 and c 3 are the 10 cheapest).
    flood("b", 100);
    flood("c", 100);
    finish("a", 10);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 30L, "b", 7L, "c", 3L));
    // As a's builds end, its slots go to b and c until each has its share.
    finish("a", 20);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 10L, "b", 20L, "c", 10L));
  }

  @Test
  void anIdleTeamsShareIsLentAndTheLenderGetsTheNextFreeSlots() {
    f = new StoreFixture(threeTeams("weight: 1", "weight: 2", "weight: 1"));
    flood("a", 100);
    flood("b", 100);
    claim(40, 100);
    // c is idle: a and b borrow its share, 1:2 between them (13 and 27, a's 14th costs 14).
    assertThat(live()).isEqualTo(Map.of("a", 13L, "b", 27L));
    flood("c", 100);
    assertThat(claim(40, 100)).isEmpty();
    // Nothing running is stopped; the next free slots are the lender's.
    finish("a", 3);
    finish("b", 2);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 10L, "b", 25L, "c", 5L));
  }

  @Test
  void aTeamBorrowsNoMoreThanItsBorrowLimit() {
    f =
        new StoreFixture(
            threeTeams("weight: 1, borrowLimit: 2", "weight: 2, borrowLimit: 0", "weight: 1"));
    flood("a", 100);
    flood("b", 100);
    claim(40, 100);
    // a: share 10 + 2; b: share 20 + 0; the 8 left are c's, kept for it by nobody: idle.
    assertThat(live()).isEqualTo(Map.of("a", 12L, "b", 20L));
    flood("c", 100);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 12L, "b", 20L, "c", 8L));
  }

  @Test
  void aGuaranteeIsKeptFreeForItsTeam() {
    f = new StoreFixture(threeTeams("weight: 1", "weight: 1, guaranteed: 5", "weight: 1"));
    flood("a", 100);
    claim(40, 100);
    // b guarantees 5 it does not use: a takes the other 35 and no more.
    assertThat(live()).isEqualTo(Map.of("a", 35L));
    enqueue("b", 0);
    enqueue("b", 0);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 35L, "b", 2L));
    // Three of b's guarantee still kept: a takes nothing more.
    assertThat(claim(40, 100)).isEmpty();
  }

  @Test
  void aHeldTeamsGuaranteeIsNotKept() {
    f = new StoreFixture(threeTeams("weight: 1", "weight: 1, guaranteed: 5", "weight: 1"));
    hold(ShareStore.Kind.TEAM, "tb");
    flood("a", 100);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 40L));
  }

  @Test
  void aTeamsCapHoldsAcrossItsRoutes() {
    f =
        new StoreFixture(
            "teams:\n  - {name: t, maxConcurrent: 3}\n"
                + "routes:\n"
                + "  - {name: a, tags: {team: a}, team: t, maxConcurrent: 10}\n"
                + "  - {name: b, tags: {team: b}, team: t, maxConcurrent: 10}\n");
    flood("a", 10);
    flood("b", 10);
    claim(100, 100);
    assertThat(live().values().stream().mapToLong(Long::longValue).sum()).isEqualTo(3);
    assertThat(claim(100, 100)).isEmpty();
  }

  @Test
  void withinATeamBuildsGoByPriorityThenAgeAcrossItsRoutes() {
    f =
        new StoreFixture(
            "teams:\n  - {name: t}\n"
                + "routes:\n"
                + "  - {name: a, tags: {team: a}, team: t, maxConcurrent: 10}\n"
                + "  - {name: b, tags: {team: b}, team: t, maxConcurrent: 10}\n"
                + "  - {name: c, tags: {team: c}, maxConcurrent: 10}\n");
    long a0 = enqueue("a", 0);
    long b5 = enqueue("b", 5);
    long a5 = enqueue("a", 5);
    enqueue("b", 0);
    long c0 = enqueue("c", 0);
    enqueue("c", 0);
    // Two teams of weight 1 (t, and c on its own) at a limit of 4: two each; t's by priority
    // then age, whichever route.
    assertThat(claim(4, 10))
        .extracting(QueueStore.Claimed::id)
        .containsExactlyInAnyOrder(b5, a5, c0, c0 + 1);
    finishAll();
    assertThat(claim(4, 10)).extracting(QueueStore.Claimed::id).contains(a0);
  }

  @Test
  void routesThatNameNoTeamAreTeamsOfTheirOwn() {
    f =
        new StoreFixture(
            "routes:\n"
                + "  - {name: a, tags: {team: a}, maxConcurrent: 100}\n"
                + "  - {name: b, tags: {team: b}, maxConcurrent: 100}\n");
    flood("a", 50);
    flood("b", 50);
    claim(20, 100);
    assertThat(live()).isEqualTo(Map.of("a", 10L, "b", 10L));
  }

  @Test
  void aHeldRouteIsSkippedAndKeepsItsBuildsUntilReleased() {
    f = new StoreFixture(threeTeams("weight: 1", "weight: 1", "weight: 1"));
    hold(ShareStore.Kind.ROUTE, "a");
    flood("a", 5);
    flood("b", 5);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("b", 5L));
    assertThat(
            Sql.value(
                "SELECT count(*) FROM oneshot.builds WHERE route = 'a' AND status ="
                    + " 'pending'"))
        .isEqualTo(5L);
    ShareStore.Released r =
        Database.await(
                f.store
                    .share()
                    .release(
                        ShareStore.Kind.ROUTE,
                        "a",
                        AuditStore.Entry.of("ops", "release-route", null, "a")))
            .orElseThrow();
    assertThat(r.was().by()).isEqualTo("ops");
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 5L, "b", 5L));
  }

  /**
   * A stalled route (its cluster takes no launches now) is skipped like a held one, keeps its
   * builds, and is claimed again once the stall is lifted; a configuration written again keeps the
   * stall while the route's cluster is the same.
   */
  @Test
  void aStalledRouteIsSkippedAndKeepsItsBuildsUntilItsClusterIsFine() {
    f = new StoreFixture(threeTeams("weight: 1", "weight: 1", "weight: 1"));
    Database.await(
        f.store
            .routeMirror()
            .stalls(List.of("a", "b", "c"), Map.of("a", "cluster home: cannot reach the API")));
    Database.await(f.store.routeMirror().write(f.config));
    flood("a", 5);
    flood("b", 5);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("b", 5L));
    assertThat(Sql.value("SELECT stalled FROM oneshot.routes WHERE name = 'a'"))
        .isEqualTo("cluster home: cannot reach the API");
    Database.await(f.store.routeMirror().stalls(List.of("a", "b", "c"), Map.of()));
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("a", 5L, "b", 5L));
  }

  @Test
  void aHeldTeamHoldsEveryRouteInIt() {
    f =
        new StoreFixture(
            "teams:\n  - {name: t}\n"
                + "routes:\n"
                + "  - {name: a, tags: {team: a}, team: t, maxConcurrent: 10}\n"
                + "  - {name: b, tags: {team: b}, team: t, maxConcurrent: 10}\n"
                + "  - {name: c, tags: {team: c}, maxConcurrent: 10}\n");
    hold(ShareStore.Kind.TEAM, "t");
    flood("a", 2);
    flood("b", 2);
    flood("c", 2);
    claim(40, 100);
    assertThat(live()).isEqualTo(Map.of("c", 2L));
  }

  @Test
  void holdsAndReleasesAreAuditedAndAnUnknownNameChangesNothing() {
    f = new StoreFixture(threeTeams("weight: 1", "weight: 1", "weight: 1"));
    assertThat(
            Database.await(
                f.store
                    .share()
                    .hold(
                        ShareStore.Kind.ROUTE,
                        "nope",
                        "ops",
                        "x",
                        AuditStore.Entry.of("ops", "hold-route", null, "nope"))))
        .isEmpty();
    assertThat(
            Database.await(
                f.store
                    .share()
                    .hold(
                        ShareStore.Kind.TEAM,
                        "a",
                        "ops",
                        "a route is no team when it is in one",
                        AuditStore.Entry.of("ops", "hold-team", null, null))))
        .isEmpty();
    ShareStore.Hold h = hold(ShareStore.Kind.TEAM, "tb");
    assertThat(h.by()).isEqualTo("ops");
    assertThat(h.why()).isEqualTo("maintenance");
    // Released twice: the second finds nothing held, and writes no audit entry.
    Database.await(
        f.store
            .share()
            .release(
                ShareStore.Kind.TEAM,
                "tb",
                AuditStore.Entry.of("ops", "release-team", null, null)));
    assertThat(
            Database.await(
                    f.store
                        .share()
                        .release(
                            ShareStore.Kind.TEAM,
                            "tb",
                            AuditStore.Entry.of("ops", "release-team", null, null)))
                .orElseThrow()
                .was())
        .isNull();
    assertThat(
            Sql.rows("SELECT action FROM oneshot.audit ORDER BY id").stream()
                .map(r -> r.get("action"))
                .toList())
        .containsExactly("hold-team", "release-team");
  }

  @Test
  void theMirrorKeepsHoldsAndRewritesWeights() {
    f = new StoreFixture(threeTeams("weight: 1", "weight: 1", "weight: 1"));
    hold(ShareStore.Kind.TEAM, "ta");
    hold(ShareStore.Kind.ROUTE, "b");
    OneshotConfig c = f.config;
    List<OneshotConfig.Team> heavier =
        c.teams().stream()
            .map(t -> t.name().equals("tc") ? new OneshotConfig.Team("tc", 3, 0, null, null) : t)
            .toList();
    Database.await(
        f.store
            .routeMirror()
            .write(
                new OneshotConfig(
                    c.database(),
                    c.api(),
                    c.dispatch(),
                    c.limits(),
                    c.launcher(),
                    c.logging(),
                    c.retention(),
                    c.routes(),
                    c.sources(),
                    c.encryption(),
                    heavier,
                    c.clusters())));
    assertThat(Sql.value("SELECT weight FROM oneshot.teams WHERE name = 'tc'")).isEqualTo(3);
    assertThat(
            Sql.value(
                "SELECT held_by FROM oneshot.teams WHERE name = 'ta' AND held_at IS NOT NULL"))
        .isEqualTo("ops");
    assertThat(
            Sql.value(
                "SELECT held_by FROM oneshot.routes WHERE name = 'b' AND held_at IS NOT NULL"))
        .isEqualTo("ops");
    // The new weights count at the next claim: tc (3) against ta's 1, b held.
    flood("a", 100);
    flood("c", 100);
    release(ShareStore.Kind.TEAM, "ta");
    claim(40, 100);
    // tb (its route held) wants nothing: the 40 slots go 1:3 between ta and tc.
    assertThat(live()).isEqualTo(Map.of("a", 10L, "c", 30L));
  }

  /**
   * The claim locks only the builds it gives each team: over four teams with free slots, one of
   * them of two routes, a claim of one locks one build, and leaves the others' free for a cancel or
   * another claimer.
   */
  @Test
  void aClaimOverManyTeamsLocksOnlyTheBuildsItTakes() {
    f =
        new StoreFixture(
            "teams: [{name: a}]\n"
                + "routes:\n"
                + "  - {name: a1, tags: {team: a1}, team: a}\n"
                + "  - {name: a2, tags: {team: a2}, team: a}\n"
                + "  - {name: c, tags: {team: c}}\n"
                + "  - {name: d, tags: {team: d}}\n"
                + "  - {name: e, tags: {team: e}}\n");
    for (String r : List.of("a1", "a2", "c", "d", "e")) {
      flood(r, 10);
    }
    List<QueueStore.Claimed> c = claim(1000, 1);
    assertThat(c).hasSize(1);
    // A row a transaction locked keeps that transaction's id as its xmax after the commit; the
    // queued builds were written fresh, so any other than 0 is one the claim locked.
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.builds WHERE status = 'pending'"
                    + " AND xmax::text <> '0'"))
        .isZero();
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'pending'"))
        .isEqualTo(49);
  }

  /**
   * Claimers and finishers racing over three teams: no team past its cap or its share and
   * borrowLimit, and no claim of another team's build taking a slot the guaranteed team was owed,
   * replayed from the builds' own timelines in commit order.
   */
  @Test
  void racingClaimsKeepEveryTeamsCapBorrowLimitAndGuarantee() throws Exception {
    String yaml =
        """
        teams:
          - {name: ta, weight: 1, borrowLimit: 2}
          - {name: tb, weight: 2, maxConcurrent: 5}
          - {name: tg, weight: 1, guaranteed: 2}
        routes:
          - {name: a, tags: {team: a}, team: ta, maxConcurrent: 100}
          - {name: b, tags: {team: b}, team: tb, maxConcurrent: 100}
          - {name: g, tags: {team: g}, team: tg, maxConcurrent: 100}
        """;
    f = new StoreFixture(yaml);
    Limits.track();
    int global = 10;
    flood("a", 150);
    flood("b", 150);
    List<StoreFixture> claimers =
        List.of(new StoreFixture(yaml, false), new StoreFixture(yaml, false));
    java.util.concurrent.BlockingQueue<QueueStore.Claimed> claimed =
        new java.util.concurrent.LinkedBlockingQueue<>();
    java.util.concurrent.atomic.AtomicBoolean done =
        new java.util.concurrent.atomic.AtomicBoolean();
    // Builds claimed and not yet finished.
    java.util.concurrent.atomic.AtomicInteger live =
        new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.ExecutorService pool =
        java.util.concurrent.Executors.newFixedThreadPool(6);
    try {
      List<java.util.concurrent.Future<?>> tasks = new java.util.ArrayList<>();
      for (StoreFixture c : claimers) {
        tasks.add(
            pool.submit(
                () -> {
                  while (!done.get()) {
                    List<QueueStore.Claimed> got =
                        Database.await(
                            c.store.queue().claim(global, "test", StoreFixture.tokens(4)));
                    synchronized (live) {
                      live.addAndGet(got.size());
                      live.notifyAll();
                    }
                    claimed.addAll(got);
                  }
                  return null;
                }));
      }
      // Team g's builds come a few at a time while the others flood.
      tasks.add(
          pool.submit(
              () -> {
                for (int i = 0; i < 30 && !done.get(); i++) {
                  enqueue("g", 0);
                  Thread.sleep(java.util.concurrent.ThreadLocalRandom.current().nextInt(20));
                }
                return null;
              }));
      for (int k = 0; k < 2; k++) {
        tasks.add(
            pool.submit(
                () -> {
                  while (!done.get()) {
                    QueueStore.Claimed c =
                        claimed.poll(100, java.util.concurrent.TimeUnit.MILLISECONDS);
                    if (c != null) {
                      // Builds run until all but the guarantee is taken, so that the claims
                      // decide at the bounds (on a loaded machine, builds that ended as soon as
                      // claimed left a team short of its cap), or until no claim has come for
                      // 20 ms (the flood is ending).
                      synchronized (live) {
                        long until = System.nanoTime() + 20_000_000L;
                        while (live.get() < global - 2 && !done.get()) {
                          long left = until - System.nanoTime();
                          if (left <= 0) {
                            break;
                          }
                          int before = live.get();
                          live.wait(Math.max(1, left / 1_000_000L));
                          if (live.get() != before) {
                            until = System.nanoTime() + 20_000_000L;
                          }
                        }
                        live.decrementAndGet();
                      }
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
      org.awaitility.Awaitility.await()
          .atMost(3, java.util.concurrent.TimeUnit.MINUTES)
          .until(
              () ->
                  Sql.count("SELECT count(*) FROM oneshot.builds WHERE finished_at IS NULL") == 0);
      done.set(true);
      for (java.util.concurrent.Future<?> t : tasks) {
        t.get(30, java.util.concurrent.TimeUnit.SECONDS);
      }
    } finally {
      done.set(true);
      pool.shutdownNow();
      claimers.forEach(StoreFixture::close);
    }
    List<String> owedTaken = new java.util.ArrayList<>();
    java.util.concurrent.atomic.AtomicInteger atTheBound =
        new java.util.concurrent.atomic.AtomicInteger();
    Map<String, Integer> max =
        Limits.replay(
            c -> {
              if (!c.team().equals("tg")) {
                int others =
                    c.liveByTeam().getOrDefault("ta", 0) + c.liveByTeam().getOrDefault("tb", 0);
                int g = c.liveByTeam().getOrDefault("tg", 0);
                // The others leave room for what g runs and, past that, what it is owed.
                if (others + Math.max(g, 2) > global) {
                  owedTaken.add(c.toString());
                } else if (others + Math.max(g, 2) == global) {
                  atTheBound.incrementAndGet();
                }
              }
            });
    assertThat(max.get("global")).isLessThanOrEqualTo(global);
    assertThat(atTheBound.get()).as("claims that filled all but the guarantee").isPositive();
    assertThat(max.get("team:tb")).isEqualTo(5);
    // ta's share of 10 by weight 1 of 4 is 2.5, rounded up, and 2 it may borrow.
    assertThat(max.get("team:ta")).isEqualTo(5);
    assertThat(owedTaken).isEmpty();
  }

  private ShareStore.Hold hold(ShareStore.Kind kind, String name) {
    return Database.await(
            f.store
                .share()
                .hold(
                    kind,
                    name,
                    "ops",
                    "maintenance",
                    AuditStore.Entry.of("ops", "hold-" + kind.wire(), null, null)))
        .orElseThrow();
  }

  private void release(ShareStore.Kind kind, String name) {
    Database.await(
        f.store
            .share()
            .release(kind, name, AuditStore.Entry.of("ops", "release-" + kind.wire(), null, null)));
  }

  private static void finishAll() {
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'failed', finished_at = now(), reason = 'test'"
            + " WHERE status = 'launching'");
  }
}
