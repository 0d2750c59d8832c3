package io.oneshot.bench;

import io.oneshot.build.Database;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.TestServer;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Runners' heartbeats while many builds run: every build's runner heartbeats once a second, as
 * provisionerd does, over the runner API. What one costs PostgreSQL and how long it waits, from the
 * end of the first round to the start of the last (nothing but heartbeats in between: acquires
 * before, completions after). Its ceiling, in the same run against the same server: {@code GET
 * /healthz}, which touches no database, from a client like the runners' (one event loop, at most 64
 * connections), once a second per build at the moments of each second its heartbeats came (their
 * acquires' times: the burst's runners beat in waves): what HTTP alone costs at that rate. Each
 * call is timed twice: from its request (a wait for one of the client's connections included: the
 * runners here share 64, where each provisionerd has its own) and from the moment it had one.
 */
final class HeartbeatBench implements Scenario {
  private static final int ROUNDS = 10;

  @Override
  public String name() {
    return "heartbeat";
  }

  @Override
  public String describe() {
    return "2,000 builds running, each heartbeating once a second: PostgreSQL's CPU a heartbeat,"
        + " latency";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int n = smoke ? 50 : 2_000;
    int rounds = smoke ? 3 : ROUNDS;
    String variant = n + " builds running, a heartbeat a second each, over HTTP";
    NoopLauncher launcher = new NoopLauncher().heartbeats(rounds, Duration.ofSeconds(1));
    try (TestServer t =
            TestServer.with()
                .routes("routes: [{name: beat, maxConcurrent: " + n + "}]")
                .dispatch("pollInterval: 2s, rescueInterval: 5s, maxConcurrent: " + n)
                .launcher(launcher)
                .start();
        Harness.Producer p = new Harness.Producer()) {
      Harness.awaitLeader(t);
      long[] ids = p.burst(n);
      Harness.await(
          "the first round of heartbeats",
          Duration.ofMinutes(2),
          () -> launcher.heartbeatsAnswered.get() >= n);
      int from = launcher.heartbeatsAnswered.get();
      launcher.heartbeatMs.clear();
      launcher.heartbeatOnConnectionMs.clear();
      CpuMeter cpu = CpuMeter.start();
      long t0 = System.nanoTime();
      Harness.await(
          "all but the last round of heartbeats",
          Duration.ofMinutes(5),
          () -> launcher.heartbeatsAnswered.get() >= n * (rounds - 1));
      CpuMeter.Used used = cpu.stop(Map.of());
      double seconds = (System.nanoTime() - t0) / 1e9;
      int beats = launcher.heartbeatsAnswered.get() - from;
      Harness.awaitBuilds(ids, "status = 'succeeded'", Duration.ofMinutes(2));
      report.add("heartbeat", variant, "heartbeats measured", beats, "");
      report.add("heartbeat", variant, "heartbeats per second", beats / seconds, "/s");
      if (used.postgresMs() >= 0) {
        report.add(
            "heartbeat", variant, "CPU a heartbeat: PostgreSQL", used.postgresMs() / beats, "ms");
      }
      report.add("heartbeat", variant, "CPU a heartbeat: this JVM", used.jvmMs() / beats, "ms");
      report.latency(
          "heartbeat",
          variant,
          "heartbeat, request to answer",
          new ArrayList<>(launcher.heartbeatMs),
          null,
          null);
      report.latency(
          "heartbeat",
          variant,
          "heartbeat, from its connection to its answer",
          new ArrayList<>(launcher.heartbeatOnConnectionMs),
          null,
          null);
      String ceiling = "ceiling: GET /healthz as often, from a client like the runners'";
      report.reference("heartbeat", ceiling);
      healthz(t.api.base(), phases(ids), rounds - 1, ceiling, report);
    }
  }

  /**
   * Each build's moment in the second its heartbeats came at, in ms: a runner beats a second after
   * each answer, starting from its acquire.
   */
  private static List<Long> phases(long[] ids) {
    List<Long> out = new ArrayList<>();
    for (Map<String, Object> r :
        io.oneshot.testing.Sql.rows(
            "SELECT (extract(epoch FROM started_at - min(started_at) OVER ()) * 1000)::bigint AS ms"
                + " FROM oneshot.builds WHERE id BETWEEN ? AND ?",
            ids[0],
            ids[1])) {
      out.add(((Number) r.get("ms")).longValue() % 1_000);
    }
    return out;
  }

  /**
   * A caller for each of {@code phases}, sending {@code GET /healthz} once a second from that
   * offset (ms), for {@code seconds}: request to answer, and this JVM's CPU a request (server and
   * client).
   */
  static void healthz(String base, List<Long> phases, int seconds, String variant, Report report) {
    Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1));
    try {
      Callers c = new Callers(vertx, base);
      CpuMeter cpu = CpuMeter.start();
      for (long phase : phases) {
        vertx.setTimer(1 + phase, t -> c.call(seconds));
      }
      Harness.await(
          "every caller's requests",
          Duration.ofSeconds(seconds + 60L),
          () -> c.done.get() == phases.size());
      CpuMeter.Used used = cpu.stop(Map.of());
      if (c.failed.get() > 0) {
        throw new IllegalStateException(c.failed.get() + " GET /healthz failed");
      }
      int measured = c.ms.size();
      report.add("heartbeat", variant, "requests measured", measured, "");
      report.add("heartbeat", variant, "CPU a request: this JVM", used.jvmMs() / measured, "ms");
      report.latency(
          "heartbeat", variant, "GET /healthz, request to answer", List.copyOf(c.ms), null, null);
      report.latency(
          "heartbeat",
          variant,
          "GET /healthz, from its connection to its answer",
          List.copyOf(c.onConnection),
          null,
          null);
    } finally {
      Database.await(vertx.close());
    }
  }

  /** The callers of {@code GET /healthz}, on one client, and what their calls measured. */
  private static final class Callers {
    final Queue<Double> ms = new ConcurrentLinkedQueue<>();
    final Queue<Double> onConnection = new ConcurrentLinkedQueue<>();
    final AtomicInteger failed = new AtomicInteger();

    /** Callers that made all their calls. */
    final AtomicInteger done = new AtomicInteger();

    private final Vertx vertx;
    private final HttpClient http;
    private final RequestOptions get;

    Callers(Vertx vertx, String base) {
      this.vertx = vertx;
      this.http = NoopLauncher.runnersClient(vertx);
      this.get = new RequestOptions().setMethod(HttpMethod.GET).setAbsoluteURI(base + "/healthz");
    }

    /** One caller's next call, then its {@code left - 1} others a second apart. */
    void call(int left) {
      if (left == 0) {
        done.incrementAndGet();
        return;
      }
      long t0 = System.nanoTime();
      long[] sent = {0};
      http.request(get)
          .compose(
              req -> {
                sent[0] = System.nanoTime();
                return req.send();
              })
          .compose(
              res ->
                  res.body()
                      .compose(
                          b ->
                              res.statusCode() == 200
                                  ? Future.succeededFuture()
                                  : Future.failedFuture("HTTP " + res.statusCode())))
          .onComplete(
              r -> {
                if (r.succeeded()) {
                  long now = System.nanoTime();
                  ms.add((now - t0) / 1e6);
                  onConnection.add((now - sent[0]) / 1e6);
                } else {
                  failed.incrementAndGet();
                }
                vertx.setTimer(1_000, t -> call(left - 1));
              });
    }
  }
}
