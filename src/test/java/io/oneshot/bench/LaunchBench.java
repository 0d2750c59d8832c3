package io.oneshot.bench;

import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.kubernetes.LaunchObjects;
import io.oneshot.testing.TempDirs;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.MockCluster;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Kubernetes launches: a burst of builds through the dispatcher, from the burst's commit to the
 * last launch recorded, beside a plain fabric8 client that launches with as many in flight and
 * nothing else (no database, no claim, no record), once with the three requests a launch takes when
 * first written (create the Secret, create the Job, make the Job own the Secret) and once with
 * oneshot's two (create the Job, create the Secret owned by it). Both run against the same kind of
 * API server, each against a fresh one: fabric8's mock (CRUD mode), whose store scans every object
 * on each request, {@link EchoApi}, which answers at once, and the echo API paced as the real API
 * server measured before this work began ({@link ApiSeats}), where the server sets the pace. Then a
 * 9:00 burst of 200 builds with the default settings (rate limit and launches in flight), against
 * the mock and the paced API.
 */
final class LaunchBench implements Scenario {
  /** Rounds of 5,000 launches each side makes before anything is measured. */
  private static final int WARM_UP_ROUNDS = 4;

  /**
   * Measured runs of each side in each case; each side's median run stands for it. With three, one
   * case of four missed its goal in each full run, a different one each time, its rounds spread
   * wider than the margin (0.65 to 1.17× on the echo API at 300 in flight, 2026-11-26).
   */
  private static final int ROUNDS = 5;

  /**
   * Launches a run against the paced API, and its rounds: the server sets the pace there, not this
   * machine's CPU, so fewer rounds settle it (a run at 64 in flight takes 7 to 11 s a side).
   */
  private static final int PACED_LAUNCHES = 1_000;

  private static final int PACED_ROUNDS = 3;

  /** Measured runs of each side in each case against a real API server (each is cleaned up). */
  private static final int REAL_ROUNDS = 3;

  /** A real API server to measure against as well ({@code --kubeconfig}), or null. */
  private final RealApi real;

  LaunchBench() {
    this(null);
  }

  LaunchBench(RealApi real) {
    this.real = real;
  }

  @Override
  public String name() {
    return "launch";
  }

  @Override
  public String describe() {
    return "Kubernetes launches per second against a plain fabric8 client with as many in flight"
        + " (mock, echo and paced API, 64 and 300 in flight); 200 builds with the default settings";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int[] inFlight = smoke ? new int[] {8} : new int[] {64, 300};
    if (!smoke) {
      // Neither side pays for its compilation in what is measured: both launch in turn on the echo
      // API, as many rounds each, until the JIT has settled. After two rounds of 3,000, as until
      // 2026-11-26, the JIT still took a fifth to a third of either side's CPU in its next 5,000,
      // and the ratio measured the compiler's progress more than the launches (0.80 to 0.90× on
      // the echo API then; four rounds of 5,000 take each side to within its run-to-run spread).
      for (int round = 0; round < WARM_UP_ROUNDS; round++) {
        round(EchoApi::new, 5_000, 64);
      }
    }
    int rounds = smoke ? 1 : ROUNDS;
    for (int f : inFlight) {
      int n = smoke ? 40 : Integer.getInteger("bench.mockBurst", 1_000);
      compare(report, "mock API, " + f + " in flight", n, rounds, LaunchBench::mock, f);
    }
    for (int f : inFlight) {
      int n = smoke ? 40 : 5_000;
      compare(report, "echo API, " + f + " in flight", n, rounds, EchoApi::new, f);
    }
    ApiSeats shape = ApiSeats.measuredServer();
    for (int f : inFlight) {
      String variant = "paced API (" + shape.describe() + "), " + f + " in flight";
      for (Recipe r : Recipe.values()) {
        report.addReference(
            "launch",
            variant,
            "the server's ceiling, " + r.requests + " requests a launch",
            shape.ceilingPerSecond() / r.requests,
            "launches/s");
      }
      int n = smoke ? 16 : PACED_LAUNCHES;
      compare(report, variant, n, smoke ? 1 : PACED_ROUNDS, LaunchBench::paced, f);
    }
    int n = smoke ? 20 : 200;
    String defaults = "default settings (qps 100, burst 300, 64 in flight)";
    Report.Goal fewSeconds = smoke ? null : Report.Goal.under(5);
    try (Api api = mock()) {
      burst(report, "mock API, " + defaults, api, n, fewSeconds);
    }
    try (Api api = paced()) {
      burst(report, "paced API (" + shape.describe() + "), " + defaults, api, n, fewSeconds);
    }
    // The same burst where the dispatcher's flow has a small share of its priority level: most of
    // a wave of 64 is turned away (429, Retry-After: 1) and comes back when the server said.
    ApiSeats busy = ApiSeats.busyLevel();
    try (EchoApi api = new EchoApi(busy)) {
      String variant =
          "paced API, a busy priority level ("
              + busy.describe()
              + ", "
              + busy.queueLimit()
              + " waiting at most), "
              + defaults;
      report.addReference(
          "launch",
          variant,
          "the server's ceiling: " + n + " launches of two requests in",
          (double) n * Recipe.TWO.requests / busy.ceilingPerSecond(),
          "s");
      // No goal: its seats alone need more than the other bursts' five seconds.
      burst(report, variant, api, n, null);
      report.add("launch", variant, "requests turned away (429)", busy.turnedAway(), "");
    }
    if (real != null) {
      for (int f : inFlight) {
        compare(
            report,
            real.describe() + ", " + f + " in flight",
            smoke ? 40 : real.launches,
            smoke ? 1 : REAL_ROUNDS,
            real::run,
            f);
      }
      try (Api api = real.run()) {
        burst(report, real.describe() + ", " + defaults, api, n, fewSeconds);
      }
    }
  }

  /**
   * {@code n} builds enqueued at once through a dispatcher with the default settings, held to
   * {@code goal} (none: null).
   */
  private static void burst(Report report, String variant, Api api, int n, Report.Goal goal) {
    report.add(
        "launch",
        variant,
        n + " builds enqueued at once: all launched in",
        dispatched(api, "", n).seconds(),
        "s",
        goal);
  }

  private static String unlimited(int inFlight) {
    return Setups.rate(10_000, 10_000) + ", launchesInFlight: " + inFlight;
  }

  /**
   * A side's {@code n} launches: how long they took, and the CPU they took (the API server's, in
   * this JVM, included).
   */
  record Run(int n, double seconds, CpuMeter.Used cpu, boolean serverInProcess) {
    double perSecond() {
      return n / seconds;
    }
  }

  /**
   * The plain client's launch: the three requests of a launch as one first writes it (and as
   * oneshot made it until 2026-11-26), or oneshot's two.
   */
  enum Recipe {
    THREE(3, "three requests: Secret, Job, owner patch"),
    TWO(2, "oneshot's two requests: Job, owned Secret");

    final int requests;
    final String what;

    Recipe(int requests, String what) {
      this.requests = requests;
      this.what = what;
    }

    void launch(KubernetesClient client, LaunchObjects.Objects o) {
      if (this == THREE) {
        LaunchObjects.createPlainly(client, o);
      } else {
        LaunchObjects.createJobThenOwnedSecret(client, o);
      }
    }
  }

  /** An API server the launches of one run are made against, fresh for each. */
  interface Api extends AutoCloseable {
    /** The plain client's. */
    KubernetesClient clientFor(Vertx vertx);

    /** The dispatcher's, configured with {@code config}. */
    default KubernetesClient dispatcherClient(Vertx vertx, OneshotConfig config) {
      return clientFor(vertx);
    }

    /** Where the launches go. */
    default String namespace() {
      return Setups.ROUTE;
    }

    /** The routes' Job templates. */
    default Path templateDir() {
      return Path.of("job-templates");
    }

    /** Whether the server runs in this JVM, so that its CPU is counted in the JVM's. */
    default boolean serverInProcess() {
      return true;
    }

    @Override
    void close();
  }

  /**
   * {@code rounds} rounds of each side's {@code n} launches, the sides in turn within a round, each
   * run against a fresh server; each side's run with the median rate stands for it. One run a side
   * moved the ratio by a fifth from one run of the scenario to the next.
   */
  private static void compare(
      Report report,
      String variant,
      int n,
      int rounds,
      java.util.function.Supplier<? extends Api> servers,
      int inFlight)
      throws Exception {
    Map<Recipe, List<Run>> plain = new EnumMap<>(Recipe.class);
    List<Run> ours = new ArrayList<>();
    List<Double> ratios = new ArrayList<>();
    double requests = 0;
    long turnedAway = -1;
    for (int i = 0; i < rounds; i++) {
      Round round = round(servers, n, inFlight);
      round.plain().forEach((r, run) -> plain.computeIfAbsent(r, k -> new ArrayList<>()).add(run));
      ours.add(round.ours());
      requests = round.requestsPerLaunch();
      turnedAway = Math.max(turnedAway, round.turnedAway());
      ratios.add(round.ours().perSecond() / round.plain().get(Recipe.THREE).perSecond());
    }
    if (requests > 0) {
      report.add("launch", variant, "API requests per launch", requests, "");
    }
    if (turnedAway >= 0) {
      report.add(
          "launch", variant, "oneshot's requests turned away (429), most in a run", turnedAway, "");
    }
    report.add("launch", variant, "launches", n, "");
    report.add("launch", variant, "rounds (each side's median run shown)", rounds, "");
    Map<Recipe, Run> plainMedian = new EnumMap<>(Recipe.class);
    plain.forEach((r, runs) -> plainMedian.put(r, Stats.median(runs, Run::perSecond)));
    Run oursMedian = Stats.median(ours, Run::perSecond);
    for (Recipe r : Recipe.values()) {
      report.addReference(
          "launch",
          variant,
          "plain fabric8 client, " + r.what,
          plainMedian.get(r).perSecond(),
          "launches/s");
    }
    report.add(
        "launch",
        variant,
        "oneshot, enqueue to launch recorded",
        oursMedian.perSecond(),
        "launches/s");
    report.add(
        "launch",
        variant,
        "oneshot ÷ plain client, three requests",
        oursMedian.perSecond() / plainMedian.get(Recipe.THREE).perSecond(),
        "×",
        Report.Goal.atLeast(1.0));
    if (rounds > 1) {
      report.add(
          "launch",
          variant,
          "oneshot ÷ plain client, three requests, round by round: lowest",
          java.util.Collections.min(ratios),
          "×");
      report.add(
          "launch",
          variant,
          "oneshot ÷ plain client, three requests, round by round: highest",
          java.util.Collections.max(ratios),
          "×");
    }
    report.add(
        "launch",
        variant,
        "oneshot ÷ plain client, the same two requests",
        oursMedian.perSecond() / plainMedian.get(Recipe.TWO).perSecond(),
        "×");
    for (Recipe r : Recipe.values()) {
      cpu(report, variant, "plain client (" + r.name().toLowerCase() + ")", plainMedian.get(r));
    }
    cpu(report, variant, "oneshot", oursMedian);
  }

  /**
   * One round: each side's {@code n} launches in turn, each against a fresh server; with the API
   * requests a launch of oneshot's took, when the server counts them (0 when it does not).
   */
  private record Round(
      Map<Recipe, Run> plain, Run ours, double requestsPerLaunch, long turnedAway) {}

  private static Round round(
      java.util.function.Supplier<? extends Api> servers, int n, int inFlight) throws Exception {
    Map<Recipe, Run> plain = new EnumMap<>(Recipe.class);
    for (Recipe r : Recipe.values()) {
      try (Api api = servers.get()) {
        plain.put(r, plain(api, n, inFlight, r));
      }
    }
    try (Api api = servers.get()) {
      Run ours = dispatched(api, unlimited(inFlight), n);
      double requests = 0;
      long turnedAway = -1;
      if (api instanceof EchoApi echo) {
        requests = (double) echo.requests.get() / n;
        turnedAway = echo.seats == null ? -1 : echo.seats.turnedAway();
      }
      return new Round(plain, ours, requests, turnedAway);
    }
  }

  /** A fresh echo API server paced as {@link ApiSeats#measuredServer()}. */
  private static Api paced() {
    return new EchoApi(ApiSeats.measuredServer());
  }

  /**
   * A fresh mock API server (CRUD mode) with its test kubelet; the plain client with fabric8's own
   * request timeout (10 s) and retries, as a program outside the tests makes one. The tests' client
   * gives up on a request after 3 s without a retry (a dispatcher tries the launch again), which on
   * a loaded machine failed a plain client's run at 300 in flight, and the scenario with it.
   */
  private static Api mock() {
    return mock(Setups.cluster());
  }

  /** {@link #mock()} on {@code c}, which the answer closes. */
  static Api mock(MockCluster c) {
    return new Api() {
      @Override
      public KubernetesClient clientFor(Vertx vertx) {
        return c.clientFor(
            vertx,
            b ->
                b.withRequestTimeout(Config.DEFAULT_REQUEST_TIMEOUT)
                    .withRequestRetryBackoffLimit(Config.DEFAULT_REQUEST_RETRY_BACKOFFLIMIT));
      }

      @Override
      public KubernetesClient dispatcherClient(Vertx vertx, OneshotConfig config) {
        return c.clientFor(vertx);
      }

      @Override
      public void close() {
        c.close();
      }
    };
  }

  /**
   * CPU a launch on each side, by process and, in this JVM (client, dispatcher and API server
   * alike), the JIT's and the collector's share: on two cores the side that needs more CPU a launch
   * launches fewer a second.
   */
  private static void cpu(Report report, String variant, String side, Run run) {
    String figure = "CPU a launch, " + side + ": ";
    CpuMeter.Used used = run.cpu();
    int n = run.n();
    report.add(
        "launch",
        variant,
        figure + (run.serverInProcess() ? "this JVM, API server included" : "this JVM"),
        used.jvmMs() / n,
        "ms");
    used.byThreadGroupMs()
        .forEach(
            (group, ms) -> report.add("launch", variant, figure + "of it " + group, ms / n, "ms"));
    if (used.postgresMs() >= 0) {
      report.add("launch", variant, figure + "PostgreSQL", used.postgresMs() / n, "ms");
    }
  }

  /**
   * The plain client: {@code inFlight} virtual threads take the next launch's objects and make its
   * requests by {@code recipe}, on a Vert.x of its own, until {@code n} are done. A launch that
   * fails fails the run (a plain client against a real API server retries as fabric8 does).
   */
  static Run plain(Api api, int n, int inFlight, Recipe recipe) throws Exception {
    // The objects of oneshot's launches, made as its launcher makes them (from its configuration,
    // whose run directory nothing uses here).
    Path dir = TempDirs.make("oneshot-bench-launch");
    List<LaunchObjects.Objects> objects;
    try {
      objects =
          LaunchObjects.forBuilds(
              Setups.kubernetes(api, "", new TimedLauncher[1]).config(dir),
              api.templateDir(),
              Setups.ROUTE,
              1,
              n);
    } finally {
      TempDirs.delete(dir);
    }
    Vertx vertx = Vertx.vertx();
    try (KubernetesClient client = api.clientFor(vertx)) {
      AtomicInteger next = new AtomicInteger();
      AtomicInteger failed = new AtomicInteger();
      AtomicReference<RuntimeException> first = new AtomicReference<>();
      CpuMeter cpu = CpuMeter.start();
      long t0 = System.nanoTime();
      try (var threads = Executors.newVirtualThreadPerTaskExecutor()) {
        for (int w = 0; w < inFlight; w++) {
          threads.execute(
              () -> {
                int i;
                while ((i = next.getAndIncrement()) < n) {
                  try {
                    recipe.launch(client, objects.get(i));
                  } catch (RuntimeException e) {
                    failed.incrementAndGet();
                    first.compareAndSet(null, e);
                  }
                }
              });
        }
      }
      double seconds = (System.nanoTime() - t0) / 1e9;
      if (failed.get() > 0) {
        throw new IllegalStateException(
            "the plain client's launches failed: " + failed.get() + " of " + n, first.get());
      }
      return new Run(n, seconds, cpu.stop(Map.of()), api.serverInProcess());
    } finally {
      vertx.close().toCompletionStage().toCompletableFuture().join();
    }
  }

  /**
   * A burst of {@code n} builds through a dispatcher with the Kubernetes launcher ({@code settings}
   * added to its section): seconds from the burst's commit to the last launch recorded, and the CPU
   * over the same time.
   */
  static Run dispatched(Api api, String settings, int n) {
    TimedLauncher[] made = new TimedLauncher[1];
    try (TestServer t = Setups.kubernetes(api, settings, made).start()) {
      Harness.awaitLeader(t);
      // From the enqueue's commit, as the time and as the drain's (PeerBench): putting the builds
      // in the queue is no part of their launches (the plain client's side has none); counted
      // here, it was most of the time PostgreSQL spent in statements in a burst against the mock
      // API (pg_stat_statements).
      CpuMeter[] cpu = new CpuMeter[1];
      double seconds = Harness.burstSeconds(t, n, () -> cpu[0] = CpuMeter.start());
      CpuMeter.Used used = cpu[0].stop(Map.of());
      // The mock API sends watch events one at a time and, when a watch closes, holds its event
      // loop until the ones still queued are sent: closing the informers before they caught up
      // blocked it past the client's close.
      Harness.await(
          "the informers saw every launch",
          Duration.ofMinutes(2),
          () -> LaunchObjects.seenAll(made[0], n));
      return new Run(n, seconds, used, api.serverInProcess());
    }
  }
}
