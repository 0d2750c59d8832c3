package io.oneshot.bench;

import com.github.kagkarlsson.scheduler.Scheduler;
import com.github.kagkarlsson.scheduler.task.helper.OneTimeTask;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestDatabase;
import io.oneshot.testing.TestServer;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;

/**
 * oneshot beside its peers, in the same run on the same database: db-scheduler draining the same
 * number of no-op tasks with its lock-and-fetch strategy, and the dispatcher itself with NOTIFY off
 * and only a poll (30 s as KEDA's ScaledJob, 3 s as GitLab Runner) against NOTIFY on.
 */
final class PeerBench implements Scenario {
  static final int CONCURRENCY = 50;

  /**
   * Each side drains this many times (5,000 each) before it is measured. The first drain in a fresh
   * JVM spent half of its CPU compiling (oneshot's HTTP, JSON and SQL paths and the runners'
   * client), a cost the side measured second would not pay. Drain by drain (10,000 each) in one
   * JVM, both sides' rates settled from about the fourth, and the JIT's share of oneshot's CPU went
   * from 0.62 ms a build in the first to 0.05 in the fourth. Their CPU a unit kept falling after
   * that: after six drains of 5,000, oneshot's JVM took 0.29 ms a build in the next drain and 0.20
   * from the eighth on, db-scheduler's 0.13 and then 0.07 ms a task (2026-11-26); after twelve,
   * both sides were flat drain after drain. A dispatcher runs for days.
   */
  static final int WARM_UPS = 12;

  /**
   * Measured drains a side, the sides in turn; each side's median run stands for it. At steady
   * state one round's ratio still moved between 0.46 and 0.55 from one round to the next on this
   * machine (db-scheduler's rate alone between 5,877 and 6,825 tasks a second).
   */
  static final int ROUNDS = 5;

  @Override
  public String name() {
    return "peer";
  }

  @Override
  public String describe() {
    return "db-scheduler (lock-and-fetch) vs oneshot draining no-op work; poll-only (30 s, 3 s)"
        + " vs NOTIFY dispatch";
  }

  /** One measured drain: its rate, and its figures, kept aside until the median is known. */
  private record Drain(double rate, Report figures) {}

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int n = smoke ? 100 : 10_000;
    int rounds = smoke ? 1 : ROUNDS;
    if (!smoke) {
      for (int i = 0; i < WARM_UPS; i++) {
        oneshotDrain(5_000, Report.scratch());
        dbSchedulerDrain(5_000, Report.scratch());
      }
    }
    List<Drain> ours = new ArrayList<>();
    List<Drain> theirs = new ArrayList<>();
    List<Double> ratios = new ArrayList<>();
    for (int i = 0; i < rounds; i++) {
      Report a = Report.scratch();
      checkpoint(report, i == 0);
      ours.add(new Drain(oneshotDrain(n, a), a));
      Report b = Report.scratch();
      checkpoint(report, false);
      theirs.add(new Drain(dbSchedulerDrain(n, b), b));
      ratios.add(ours.getLast().rate() / theirs.getLast().rate());
    }
    report.add(
        "peer", "oneshot ÷ db-scheduler", "rounds (each side's median run shown)", rounds, "");
    Drain oneshot = Stats.median(ours, Drain::rate);
    Drain scheduler = Stats.median(theirs, Drain::rate);
    oneshot.figures().figures().forEach(report::add);
    scheduler.figures().figures().forEach(report::add);
    report.add(
        "peer",
        "oneshot ÷ db-scheduler",
        "drain rate ratio",
        oneshot.rate() / scheduler.rate(),
        "×",
        Report.Goal.atLeast(0.5));
    if (rounds > 1) {
      report.add(
          "peer",
          "oneshot ÷ db-scheduler",
          "drain rate ratio, round by round: lowest",
          Collections.min(ratios),
          "×");
      report.add(
          "peer",
          "oneshot ÷ db-scheduler",
          "drain rate ratio, round by round: highest",
          Collections.max(ratios),
          "×");
    }

    double event =
        pickUp(
            "NOTIFY + 2 s poll (default)",
            true,
            Duration.ofSeconds(2),
            smoke ? 3 : 40,
            Duration.ofMillis(smoke ? 100 : 250),
            report);
    Duration gitlab = smoke ? Duration.ofMillis(300) : Duration.ofSeconds(3);
    Duration keda = smoke ? Duration.ofSeconds(1) : Duration.ofSeconds(30);
    double poll3 =
        pickUp(
            "poll only, " + label(gitlab) + " (GitLab Runner's default)",
            false,
            gitlab,
            smoke ? 3 : 20,
            gitlab.dividedBy(3),
            report);
    double poll30 =
        pickUp(
            "poll only, " + label(keda) + " (KEDA ScaledJob's default)",
            false,
            keda,
            smoke ? 3 : 12,
            keda.dividedBy(4),
            report);
    report.add(
        "peer", "poll " + label(gitlab) + " ÷ NOTIFY", "pick-up p50 ratio", poll3 / event, "×");
    report.add(
        "peer", "poll " + label(keda) + " ÷ NOTIFY", "pick-up p50 ratio", poll30 / event, "×");
  }

  /**
   * A checkpoint before each measured drain, so that neither side drains through one that the
   * scenarios before left under way (the queue-scale scenario writes a million rows just before):
   * its writes and flushes took the CPU and disk of whichever side it overlapped. Needs a role that
   * may checkpoint (a superuser or pg_checkpoint); without one, says so once and goes on.
   */
  private static void checkpoint(Report report, boolean sayWhy) {
    try {
      Sql.exec("CHECKPOINT");
    } catch (RuntimeException e) {
      if (sayWhy) {
        report.note("peer: no CHECKPOINT before each drain (" + e.getMessage() + ")");
      }
    }
  }

  private static String label(Duration d) {
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
  }

  /**
   * oneshot drains n builds enqueued in one statement, through a route of {@link #CONCURRENCY}
   * slots, each build acquired and completed over the runner API.
   */
  static double oneshotDrain(int n, Report report) {
    NoopLauncher launcher = new NoopLauncher();
    try (TestServer t =
            TestServer.with()
                .routes("routes: [{name: bench, maxConcurrent: " + CONCURRENCY + "}]")
                .dispatch("pollInterval: 2s, rescueInterval: 5s")
                .launcher(launcher)
                .start();
        Harness.Producer p = new Harness.Producer()) {
      Harness.awaitLeader(t);
      long[] ids = p.burst(n);
      // From the enqueue's commit, as db-scheduler's side from after its tasks' insert: the CPU of
      // putting the work in the queue is neither side's drain.
      CpuMeter cpu = CpuMeter.start();
      // Counted in memory while it drains, as db-scheduler's side is: a count over the builds
      // every 20 ms would take CPU from the database the drain runs on. Then checked once.
      Harness.await(
          "every build completed",
          Duration.ofMinutes(10),
          () -> launcher.completed.get() + launcher.errors.get() >= n);
      CpuMeter.Used used = cpu.stop(ONESHOT_THREADS);
      Harness.awaitBuilds(ids, "status = 'succeeded'", Duration.ofSeconds(30));
      Instant last = Harness.latest(ids, "finished_at");
      double rate = n / (Duration.between(p.answered.get(ids[0]), last).toNanos() / 1e9);
      String variant = "oneshot, " + CONCURRENCY + " at once, acquire + complete over HTTP";
      report.add("peer", variant, "drained per second", rate, "builds/s");
      breakdown(ids, variant, report);
      cpu(report, variant, "build", n, used);
      return rate;
    }
  }

  /**
   * oneshot's side of the drain, by thread name: its own threads (the API's and the database
   * client's event loops, the dispatcher, the rescuer, the virtual threads' carriers its launch
   * calls run on), and the simulated runners (their event loop). The JIT's and the collector's
   * threads are counted apart ({@link CpuMeter}).
   */
  private static final Map<String, Predicate<String>> ONESHOT_THREADS = new LinkedHashMap<>();

  static {
    ONESHOT_THREADS.put(
        "oneshot's threads (API, database client, dispatcher)",
        n -> n.startsWith("vert.x-") || n.startsWith("oneshot-") || n.startsWith("ForkJoinPool-"));
    ONESHOT_THREADS.put(
        "the simulated runners (a Vert.x HTTP client on one event loop)",
        n -> n.equals(NoopLauncher.THREAD));
  }

  /** CPU per unit of work over a drain, by process and, for the JVM, by thread group. */
  private static void cpu(Report report, String variant, String unit, int n, CpuMeter.Used used) {
    if (used.postgresMs() >= 0) {
      report.add("peer", variant, "CPU a " + unit + ": PostgreSQL", used.postgresMs() / n, "ms");
    }
    report.add("peer", variant, "CPU a " + unit + ": this JVM", used.jvmMs() / n, "ms");
    used.byThreadGroupMs()
        .forEach(
            (group, ms) ->
                report.add("peer", variant, "CPU a " + unit + ": " + group, ms / n, "ms"));
  }

  /**
   * Where a slot's time goes, from the builds' own timestamps: a slot cycles through claim ->
   * acquired -> completed, then waits until a claim fills it again (the k-th claim after the first
   * {@link #CONCURRENCY} fills the slot the (k - CONCURRENCY)-th finish freed). The first three
   * means add up to the time a slot takes per build, so the drain rate is about CONCURRENCY over
   * their sum.
   */
  private static void breakdown(long[] ids, String variant, Report report) {
    Map<String, Object> r =
        Sql.rows(
                """
                WITH b AS (
                  SELECT claimed_at, launched_at, started_at, finished_at
                  FROM %s WHERE id BETWEEN ? AND ?
                ), c AS (
                  SELECT claimed_at, row_number() OVER (ORDER BY claimed_at) AS k FROM b
                ), f AS (
                  SELECT finished_at, row_number() OVER (ORDER BY finished_at) AS k FROM b
                )
                SELECT
                  (SELECT avg(extract(epoch FROM started_at - claimed_at)) FROM b) AS acquire,
                  (SELECT avg(extract(epoch FROM launched_at - claimed_at)) FROM b) AS launch,
                  (SELECT avg(extract(epoch FROM finished_at - started_at)) FROM b) AS complete,
                  (SELECT avg(extract(epoch FROM c.claimed_at - f.finished_at))
                   FROM c JOIN f ON f.k = c.k - ?) AS refill
                """
                    .formatted(Harness.BUILDS),
                ids[0],
                ids[1],
                CONCURRENCY)
            .get(0);
    String[][] parts = {
      {"acquire", "slot: claimed -> acquired, mean"},
      {"complete", "slot: acquired -> completed, mean"},
      {"refill", "slot: completed -> claimed again, mean"},
      // Beside the slot's path, not on it: the runner may acquire before the launch is recorded.
      {"launch", "claimed -> launch recorded, mean"},
    };
    for (String[] p : parts) {
      Object v = r.get(p[0]);
      if (v != null) {
        report.add("peer", variant, p[1], ((Number) v).doubleValue() * 1000, "ms");
      }
    }
  }

  /**
   * db-scheduler drains n due one-time tasks that do nothing, with {@link #CONCURRENCY} threads.
   */
  static double dbSchedulerDrain(int n, Report report) throws Exception {
    Sql.exec(
        """
        DROP TABLE IF EXISTS scheduled_tasks;
        CREATE TABLE scheduled_tasks (
          task_name text NOT NULL,
          task_instance text NOT NULL,
          task_data bytea,
          execution_time timestamptz NOT NULL,
          picked boolean NOT NULL,
          picked_by text,
          last_success timestamptz,
          last_failure timestamptz,
          consecutive_failures int,
          last_heartbeat timestamptz,
          version bigint NOT NULL,
          priority smallint,
          PRIMARY KEY (task_name, task_instance)
        );
        CREATE INDEX execution_time_idx ON scheduled_tasks (execution_time);
        CREATE INDEX last_heartbeat_idx ON scheduled_tasks (last_heartbeat);
        CREATE INDEX priority_execution_time_idx ON scheduled_tasks (priority DESC, execution_time);
        """);
    Sql.exec(
        "INSERT INTO scheduled_tasks (task_name, task_instance, execution_time, picked, version)"
            + " SELECT 'noop', i::text, now(), false, 1 FROM generate_series(1, ?) i",
        n);
    AtomicInteger done = new AtomicInteger();
    OneTimeTask<Void> task = Tasks.oneTime("noop").execute((inst, ctx) -> done.incrementAndGet());
    HikariConfig hc = new HikariConfig();
    hc.setJdbcUrl(TestDatabase.jdbcUrl());
    hc.setMaximumPoolSize(CONCURRENCY + 5);
    try (HikariDataSource ds = new HikariDataSource(hc)) {
      Scheduler s =
          Scheduler.create(ds, task)
              .threads(CONCURRENCY)
              .pollUsingLockAndFetch(0.5, 1.0)
              .pollingInterval(Duration.ofSeconds(1))
              .build();
      CpuMeter cpu = CpuMeter.start();
      CpuMeter.Used used;
      long t0 = System.nanoTime();
      s.start();
      try {
        Harness.await("db-scheduler drains", Duration.ofMinutes(10), () -> done.get() >= n);
        used = cpu.stop(Map.of());
        Harness.await(
            "db-scheduler removes its executions",
            Duration.ofMinutes(1),
            () -> Sql.count("SELECT count(*) FROM scheduled_tasks") == 0);
      } finally {
        s.stop();
      }
      double rate = n / ((System.nanoTime() - t0) / 1e9);
      String variant =
          "db-scheduler 16.12, " + CONCURRENCY + " threads, lock-and-fetch, in process";
      report.reference("peer", variant);
      report.add("peer", variant, "drained per second", rate, "tasks/s");
      cpu(report, variant, "task", n, used);
      return rate;
    } finally {
      Sql.exec("DROP TABLE IF EXISTS scheduled_tasks");
    }
  }

  /**
   * Builds enqueued one at a time at random moments (mean gap as given) on an idle dispatcher: from
   * commit to claim. Returns the p50.
   */
  private static double pickUp(
      String variant, boolean notify, Duration poll, int n, Duration meanGap, Report report) {
    TimedLauncher launcher = new TimedLauncher(new NoopLauncher(false));
    try (TestServer t =
            TestServer.with()
                .routes(Setups.OPEN_ROUTE)
                .dispatch(
                    "maxConcurrent: 100000, rescueInterval: 5s, pollInterval: %dms, wakeOnNotify: %s"
                        .formatted(poll.toMillis(), notify))
                .launcher(launcher)
                .start();
        Harness.Producer p = new Harness.Producer()) {
      Harness.awaitLeader(t);
      long[] ids = {-1, -1};
      long next = System.nanoTime();
      for (int i = 0; i < n; i++) {
        next += (long) (2 * meanGap.toNanos() * ThreadLocalRandom.current().nextDouble());
        Harness.sleepUntil(next);
        ids[1] = p.enqueue();
        if (ids[0] < 0) {
          ids[0] = ids[1];
        }
      }
      Harness.awaitBuilds(ids, "claimed_at IS NOT NULL", poll.multipliedBy(3).plusSeconds(30));
      Map<Long, Harness.Times> times = Harness.times(ids[0], ids[1]);
      List<Double> ms = new ArrayList<>();
      for (long id = ids[0]; id <= ids[1]; id++) {
        ms.add(Harness.ms(p.committedBefore(id, times.get(id).claimed()), times.get(id).claimed()));
      }
      if (!notify) {
        // Polling as GitLab Runner and KEDA do: the peers of oneshot's NOTIFY.
        report.reference("peer", variant);
      }
      report.latency("peer", variant, "enqueue -> claimed", ms, null, null);
      return Stats.of(ms).p50();
    }
  }
}
