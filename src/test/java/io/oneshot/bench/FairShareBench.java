package io.oneshot.bench;

import io.oneshot.build.BuildStore;
import io.oneshot.build.BuildToken;
import io.oneshot.build.Database;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestDatabase;
import io.oneshot.testing.TestServer;
import io.vertx.core.Vertx;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Fair share between teams (docs/fair-share.md), three ways:
 *
 * <ul>
 *   <li><b>flood</b>: teams a, b and c of weights 1:2:1 flood a global limit of 40 with builds that
 *       run 400 ms each (a no-op runner's acquire, a heartbeat 400 ms later, its completion). From
 *       the builds' own timelines (claimed and finished), each second's running builds per team
 *       beside its weighted share (10, 20, 10): right after the last claim of the second (what the
 *       claim decides) and at the second itself (with the builds that just ended and whose slots
 *       the next claim has not taken yet). Goal: within one build of the weighted share after the
 *       first second.
 *   <li><b>lend</b>: c idle while a and b flood: its share is borrowed (a 13, b 27); then c floods
 *       too, and the time from its enqueue to its share of 10 running, beside the build's own run
 *       time (nothing running is stopped: a slot comes back when a borrowed build ends).
 *   <li><b>claim</b>: the claim statement alone (lock, fence, claim, commit) with 1,000,000 builds
 *       queued on one route (the reference) and spread over 50 teams of weights 1 to 5, each with
 *       free slots: claims of 1 and of 100.
 * </ul>
 */
final class FairShareBench implements Scenario {
  private static final String SCENARIO = "fair-share";
  private static final int GLOBAL = 40;
  private static final Duration RUNS = Duration.ofMillis(400);
  private static final int[] WEIGHTS = {1, 2, 1};
  private static final String[] TEAMS = {"a", "b", "c"};

  @Override
  public String name() {
    return SCENARIO;
  }

  @Override
  public String describe() {
    return "three teams 1:2:1 flooding a global limit of 40 (running shares each second beside the"
        + " weights), an idle team's share lent and given back, and the claim over 50 teams and"
        + " 1,000,000 queued beside one route's";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    floodAndLend(smoke, report);
    claims(smoke, report);
    enqueueToClaimed(smoke, report);
  }

  /**
   * Enqueue to claimed as the latency scenario measures it (a build at a time, paced), beside the
   * same with one route: here 49 more teams (weights 1 to 5) each run its route's limit of 20 while
   * 1,000,000 builds wait behind them, as a morning's backlog would; the measured builds go to a
   * team of their own with room.
   */
  private void enqueueToClaimed(boolean smoke, Report report) {
    int seconds = smoke ? 1 : 30;
    int warmup = smoke ? 0 : 100;
    int queued = smoke ? 20_000 : 1_000_000;
    TimedLauncher alone = new TimedLauncher(new NoopLauncher(false));
    String one = "one route, nothing else queued";
    report.reference(SCENARIO, one);
    try (TestServer t = Setups.noop(alone).start()) {
      LatencyBench.measure(t, alone, SCENARIO, one, seconds, warmup, report);
    }
    StringBuilder y = new StringBuilder("teams:\n");
    for (int i = 1; i < 50; i++) {
      y.append("  - {name: ").append(route(i)).append(", weight: ").append(1 + i % 5).append("}\n");
    }
    y.append("routes:\n  - {name: ").append(Setups.ROUTE).append(", maxConcurrent: 100000}\n");
    for (int i = 1; i < 50; i++) {
      y.append("  - {name: ")
          .append(route(i))
          .append(", tags: {team: ")
          .append(route(i))
          .append("}, team: ")
          .append(route(i))
          .append(", maxConcurrent: 20}\n");
    }
    TimedLauncher busy = new TimedLauncher(new NoopLauncher(false));
    String fifty =
        String.format(
            Locale.ROOT,
            "50 teams: 49 at their limits (980 running), %,d queued behind them",
            queued);
    try (TestServer t =
        TestServer.with().routes(y.toString()).dispatch(Setups.DISPATCH).launcher(busy).start()) {
      Harness.awaitLeader(t);
      int chunk = 100_000;
      for (int done = 0; done < queued; done += chunk) {
        Sql.exec(
            "INSERT INTO oneshot.builds (route, tags, input)"
                + " SELECT 't' || lpad((1 + g % 49)::text, 2, '0'), '{}', ?::jsonb"
                + " FROM generate_series(1, ?) g",
            Harness.SCRIPT_INPUT, Math.min(chunk, queued - done));
      }
      Sql.exec("VACUUM ANALYZE oneshot.builds; SELECT pg_notify('oneshot_builds', '')");
      Harness.await(
          "49 teams at their limits",
          Duration.ofMinutes(2),
          () ->
              Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'launching'")
                  == 49 * 20);
      LatencyBench.measure(t, busy, SCENARIO, fifty, seconds, warmup, report);
    }
  }

  private static String config() {
    StringBuilder y = new StringBuilder("teams:\n");
    for (int i = 0; i < TEAMS.length; i++) {
      y.append("  - {name: ")
          .append(TEAMS[i])
          .append(", weight: ")
          .append(WEIGHTS[i])
          .append("}\n");
    }
    y.append("routes:\n");
    for (String t : TEAMS) {
      y.append("  - {name: r")
          .append(t)
          .append(", tags: {team: ")
          .append(t)
          .append("}, team: ")
          .append(t)
          .append(", maxConcurrent: 1000}\n");
    }
    return y.toString();
  }

  private void floodAndLend(boolean smoke, Report report) {
    NoopLauncher runner = new NoopLauncher().heartbeats(1, RUNS);
    try (TestServer t =
        TestServer.with()
            .routes(config())
            .dispatch("maxConcurrent: " + GLOBAL + ", pollInterval: 2s, heartbeatInterval: 1s")
            .launcher(runner)
            .start()) {
      Harness.awaitLeader(t);
      int per = smoke ? 40 : 500;
      // The flood: each team's builds in proportion to its weight, so that every queue lasts as
      // long as the others' at its share.
      long first = Sql.count("SELECT coalesce(max(id), 0) FROM oneshot.builds") + 1;
      enqueue(Map.of("a", per, "b", 2 * per, "c", per));
      long last = first + 4L * per - 1;
      Harness.awaitBuilds(
          new long[] {first, last}, "finished_at IS NOT NULL", Duration.ofMinutes(10));
      flood(first, last, report);

      // Lend: c idle while a and b flood; then c floods too.
      int lend = smoke ? 40 : 200;
      long lendFirst = last + 1;
      enqueue(Map.of("a", 4 * lend, "b", 8 * lend));
      Harness.sleepUntil(System.nanoTime() + Duration.ofSeconds(smoke ? 2 : 4).toNanos());
      Instant cAt = Instant.now();
      long cFirst = lendFirst + 12L * lend;
      enqueue(Map.of("c", 4 * lend));
      long lendLast = cFirst + 4L * lend - 1;
      Harness.awaitBuilds(
          new long[] {lendFirst, lendLast}, "finished_at IS NOT NULL", Duration.ofMinutes(10));
      lend(lendFirst, lendLast, cFirst, cAt, report);
    }
  }

  /** Enqueues {@code n} builds per team, in one statement, and wakes the dispatcher. */
  private static void enqueue(Map<String, Integer> n) {
    StringBuilder sql = new StringBuilder();
    for (String t : TEAMS) {
      Integer count = n.get(t);
      if (count == null) {
        continue;
      }
      sql.append(sql.isEmpty() ? "" : " UNION ALL ")
          .append("SELECT 'r")
          .append(t)
          .append("', '{\"team\": \"")
          .append(t)
          .append("\"}'::jsonb, '")
          .append(Harness.SCRIPT_INPUT)
          .append("'::jsonb FROM generate_series(1, ")
          .append(count)
          .append(")");
    }
    Sql.exec(
        "INSERT INTO oneshot.builds (route, tags, input) SELECT * FROM ("
            + sql
            + ") x ORDER BY 1; SELECT pg_notify('oneshot_builds', '')");
  }

  /** A build's time running (claimed to finished), in epoch ms, by team. */
  private record Span(String team, double claimed, double finished) {}

  private static List<Span> spans(long first, long last) {
    List<Span> out = new ArrayList<>();
    for (Map<String, Object> r :
        Sql.rows(
            "SELECT route, extract(epoch FROM claimed_at) * 1000 AS c,"
                + " extract(epoch FROM finished_at) * 1000 AS f, attempt"
                + " FROM oneshot.builds WHERE id BETWEEN ? AND ? ORDER BY claimed_at",
            first,
            last)) {
      if (((Number) r.get("attempt")).intValue() != 1) {
        throw new IllegalStateException("a build was requeued: " + r);
      }
      out.add(
          new Span(
              ((String) r.get("route")).substring(1),
              ((Number) r.get("c")).doubleValue(),
              ((Number) r.get("f")).doubleValue()));
    }
    return out;
  }

  private static Map<String, Integer> live(List<Span> spans, double at) {
    Map<String, Integer> out = new LinkedHashMap<>();
    for (String t : TEAMS) {
      out.put(t, 0);
    }
    for (Span s : spans) {
      if (s.claimed() <= at && s.finished() > at) {
        out.merge(s.team(), 1, Integer::sum);
      }
    }
    return out;
  }

  private static double deviation(Map<String, Integer> live) {
    double max = 0;
    for (int i = 0; i < TEAMS.length; i++) {
      double share = (double) GLOBAL * WEIGHTS[i] / 4;
      max = Math.max(max, Math.abs(live.get(TEAMS[i]) - share));
    }
    return max;
  }

  private static void flood(long first, long last, Report report) {
    List<Span> spans = spans(first, last);
    double start = spans.get(0).claimed();
    // Contended while every team still has builds to claim: up to the first team's last claim.
    double end = Double.MAX_VALUE;
    for (String t : TEAMS) {
      double lastClaim =
          spans.stream().filter(s -> s.team().equals(t)).mapToDouble(Span::claimed).max().orElse(0);
      end = Math.min(end, lastClaim);
    }
    List<Double> afterClaim = new ArrayList<>();
    List<Double> atSecond = new ArrayList<>();
    double[] mean = new double[TEAMS.length];
    int seconds = 0;
    for (double s = start + 1000; s < end; s += 1000) {
      final double at = s;
      double lastClaim =
          spans.stream().mapToDouble(Span::claimed).filter(c -> c <= at).max().orElse(at);
      Map<String, Integer> settled = live(spans, lastClaim);
      afterClaim.add(deviation(settled));
      Map<String, Integer> now = live(spans, at);
      atSecond.add(deviation(now));
      for (int i = 0; i < TEAMS.length; i++) {
        mean[i] += settled.get(TEAMS[i]);
      }
      seconds++;
    }
    String variant = "3 teams 1:2:1, limit 40, builds of 400 ms";
    report.add(SCENARIO, variant, "contended seconds measured", seconds, "s");
    report.add(
        SCENARIO,
        variant,
        "after each second's last claim: most builds off the weighted share",
        afterClaim.stream().mapToDouble(Double::doubleValue).max().orElse(0),
        "builds",
        Report.Goal.under(2));
    report.add(
        SCENARIO,
        variant,
        "at each second (freed slots not yet claimed): p50 builds off the weighted share",
        atSecond.isEmpty() ? 0 : Stats.of(atSecond).p50(),
        "builds");
    report.add(
        SCENARIO,
        variant,
        "at each second: most builds off the weighted share",
        atSecond.stream().mapToDouble(Double::doubleValue).max().orElse(0),
        "builds");
    for (int i = 0; i < TEAMS.length; i++) {
      report.add(
          SCENARIO,
          variant,
          "team "
              + TEAMS[i]
              + " (weight "
              + WEIGHTS[i]
              + ", share "
              + GLOBAL * WEIGHTS[i] / 4
              + ") mean running",
          seconds == 0 ? 0 : mean[i] / seconds,
          "builds");
    }
  }

  private static void lend(long first, long last, long cFirst, Instant cAt, Report report) {
    List<Span> spans = spans(first, last);
    double cMs = cAt.toEpochMilli();
    // Borrowing: a and b's builds running just before c's enqueue.
    double lastClaimBefore =
        spans.stream().mapToDouble(Span::claimed).filter(c -> c < cMs).max().orElse(cMs);
    Map<String, Integer> borrowed = live(spans, lastClaimBefore);
    String variant = "c idle, then flooding (limit 40, shares 10/20/10)";
    report.add(SCENARIO, variant, "team a running while c is idle", borrowed.get("a"), "builds");
    report.add(SCENARIO, variant, "team b running while c is idle", borrowed.get("b"), "builds");
    // Given back: the first claim at which c runs its share.
    List<Double> claims = spans.stream().map(Span::claimed).filter(c -> c >= cMs).sorted().toList();
    double back = Double.NaN;
    for (double c : claims) {
      if (live(spans, c).get("c") >= 10) {
        back = c - cMs;
        break;
      }
    }
    report.add(
        SCENARIO,
        variant,
        "c's enqueue -> its share of 10 running",
        back,
        "ms",
        Report.Goal.under(RUNS.toMillis() * 2.5));
    report.addReference(
        SCENARIO,
        variant,
        "a build's run time (a borrowed slot comes back when it ends)",
        RUNS.toMillis(),
        "ms");
    report.note(
        String.format(
            Locale.ROOT,
            "fair-share: while c was idle a and b borrowed its share %d:%d (1:2 of 40); once c"
                + " flooded, borrowed slots came back as their builds ended, none stopped.",
            borrowed.get("a"),
            borrowed.get("b")));
  }

  /** The claim statement alone over 1,000,000 queued: on one route, and over 50 teams. */
  private void claims(boolean smoke, Report report) {
    int queued = smoke ? 20_000 : 1_000_000;
    int samples = smoke ? 10 : 300;
    Vertx vertx = Vertx.vertx();
    try (Database db = Database.open(vertx, TestDatabase.url(), 2, "oneshot-bench")) {
      BuildStore store = new BuildStore(db.pool());
      String one = String.format(Locale.ROOT, "%,d queued on one route", queued);
      report.reference(SCENARIO, one);
      fill(1, queued);
      List<Double> oneOf1 = claims(store, 1, 1, samples);
      List<Double> oneOf100 = claims(store, 1, 100, samples / 10);
      report.latency(SCENARIO, one, "claim of 1", oneOf1, null, null);
      report.latency(SCENARIO, one, "claim of 100", oneOf100, null, null);

      String fifty = String.format(Locale.ROOT, "%,d queued over 50 teams", queued);
      fill(50, queued);
      List<Double> fiftyOf1 = claims(store, 50, 1, samples);
      List<Double> fiftyOf100 = claims(store, 50, 100, samples / 10);
      report.latency(SCENARIO, fifty, "claim of 1", fiftyOf1, Report.Goal.under(2), null);
      report.latency(SCENARIO, fifty, "claim of 100", fiftyOf100, null, null);
      report.add(
          SCENARIO,
          fifty + " ÷ one route",
          "claim of 1, p50 ratio",
          Stats.of(fiftyOf1).p50() / Stats.of(oneOf1).p50(),
          "×");
    } finally {
      Database.await(vertx.close());
    }
  }

  /** Empties the queue and loads {@code n} builds over {@code teams} routes, each its own team. */
  private static void fill(int teams, int n) {
    Sql.reset();
    for (int i = 0; i < teams; i++) {
      Sql.exec(
          "INSERT INTO oneshot.routes (name, position, tags, max_concurrent, max_attempts,"
              + " timeout_ms, cancel_grace_ms, team) VALUES (?, ?, '{}', 100000, 3, 3600000,"
              + " 10000, ?)",
          route(i),
          i,
          route(i));
      Sql.exec("INSERT INTO oneshot.teams (name, weight) VALUES (?, ?)", route(i), 1 + i % 5);
    }
    int chunk = 100_000;
    for (int done = 0; done < n; done += chunk) {
      Sql.exec(
          "INSERT INTO oneshot.builds (route, tags, input)"
              + " SELECT 't' || lpad((g % ?)::text, 2, '0'), '{}', ?::jsonb"
              + " FROM generate_series(1, ?) g",
          teams, Harness.SCRIPT_INPUT, Math.min(chunk, n - done));
      if (n > chunk) {
        System.out.printf("   loaded %,d of %,d queued builds%n", Math.min(done + chunk, n), n);
      }
    }
    Sql.exec("VACUUM ANALYZE oneshot.builds");
  }

  private static String route(int i) {
    return String.format(Locale.ROOT, "t%02d", i);
  }

  private static List<Double> claims(BuildStore store, int teams, int batch, int samples) {
    List<Double> ms = new ArrayList<>();
    int warmup = Math.max(3, samples / 10);
    for (int i = 0; i < warmup + samples; i++) {
      List<BuildToken> tokens = new ArrayList<>(batch);
      for (int j = 0; j < batch; j++) {
        tokens.add(BuildToken.generate());
      }
      long t0 = System.nanoTime();
      int claimed = Database.await(store.queue().claim(100_000, "noop", tokens)).size();
      double took = (System.nanoTime() - t0) / 1e6;
      if (claimed != batch) {
        throw new IllegalStateException("claimed " + claimed + " of " + batch);
      }
      if (i >= warmup) {
        ms.add(took);
      }
      // Untimed: the claimed builds run and succeed, and as many new ones arrive.
      Sql.exec(
          "UPDATE oneshot.builds SET status = 'running', started_at = now(), runner_id = 'r'"
              + " WHERE status = 'launching';"
              + " UPDATE oneshot.builds SET status = 'succeeded', finished_at = now()"
              + " WHERE status = 'running';"
              + " INSERT INTO oneshot.builds (route, tags, input)"
              + " SELECT 't' || lpad((g % "
              + teams
              + ")::text, 2, '0'), '{}', '"
              + Harness.SCRIPT_INPUT
              + "'::jsonb FROM generate_series(1, "
              + batch
              + ") g");
    }
    return ms;
  }
}
