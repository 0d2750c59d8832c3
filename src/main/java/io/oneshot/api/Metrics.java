package io.oneshot.api;

import io.oneshot.build.BuildReads.RouteStatus;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.instrumentation.jvm.JvmMetrics;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.vertx.core.Future;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.function.IntSupplier;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * Every metric oneshot exports at {@code /metrics}, named in one place. Labels are bounded: route,
 * team and outcome, a requeue's kind, a Kubernetes verb and status code; never a build or
 * workspace.
 *
 * <p>Queue depth ({@code oneshot_builds_queued}, {@code oneshot_builds_running}) is computed from
 * the database by the leading replica only; the others export no such series. Summing them across
 * replicas is therefore right. The histograms and counters are counted where the event happens, on
 * whichever replica handled it; summing those is right too.
 */
public final class Metrics {
  /** For builds: 100 ms to 1 h. */
  static final double[] BUILD_BUCKETS = {
    0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600
  };

  /** For dispatch: 1 ms to 10 s. */
  static final double[] DISPATCH_BUCKETS = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
  };

  /** The kinds of requeue, the label values of {@code oneshot_build_requeues_total}. */
  public enum Requeue {
    /** The attempt ended before provisionerd acquired the build. */
    ENDED_BEFORE_ACQUIRE("ended_before_acquire"),
    /** The attempt vanished (its process or Job is gone) before acquire. */
    VANISHED("vanished"),
    /** The attempt did not acquire within the route's launch timeout. */
    LAUNCH_TIMEOUT("launch_timeout"),
    /** A script build's attempt was lost after acquire, on a route that allows retrying it. */
    LOST_AFTER_ACQUIRE("lost_after_acquire");

    final String label;

    Requeue(String label) {
      this.label = label;
    }
  }

  private final PrometheusRegistry registry = new PrometheusRegistry();

  /**
   * The JVM's memory, GC, threads and the process's CPU and open files ({@code jvm_*}, {@code
   * process_*}): one set per JVM, scraped with every instance's own. JvmMetrics keeps every
   * registry it was given in a static set, so registering them in each instance's registry kept
   * every instance alive, and with it all its gauges' callbacks reach: a whole dispatcher, its
   * informers' caches included, for each server a test or benchmark had started and closed.
   */
  private static final PrometheusRegistry JVM = new PrometheusRegistry();

  static {
    JvmMetrics.builder().register(JVM);
  }

  private final Gauge queued;
  private final Gauge running;
  private final Histogram queueWait;
  private final Histogram dispatch;
  private final Histogram start;
  private final Histogram duration;
  private final Counter builds;
  private final Counter requeues;
  private final Counter kubernetesRequests;
  private final Counter runnerConflicts;
  private final Counter runnerUnproven;
  private final Counter deleted;
  private final Counter sourceBuilds;
  private final Counter refused;
  private final Counter troubles;
  private final Gauge balloonsWanted;
  private final Gauge balloons;
  private final Counter balloonPreemptions;
  private final Counter balloonSeconds;
  private final Counter cpuThrottled;
  private final Gauge dbConnections;
  private final Gauge dbPoolMax;
  private final Counter logLines;
  private final Counter apiRequests;
  private final Histogram apiDuration;
  private final Gauge teamShare;
  private final Gauge teamRunning;
  private final Gauge teamQueued;
  private final Gauge teamBorrowed;
  private final Gauge teamHeld;
  private final Gauge routeHeld;
  private final Set<String> routesShown = new HashSet<>();
  private final Set<String> teamsShown = new HashSet<>();
  private volatile Supplier<Future<Void>> beforeScrape = Future::succeededFuture;

  public Metrics() {
    queued =
        Gauge.builder()
            .name("oneshot_builds_queued")
            .help("Builds waiting in the queue, per route (exported by the leading replica)")
            .labelNames("route")
            .register(registry);
    running =
        Gauge.builder()
            .name("oneshot_builds_running")
            .help("Builds launching or running, per route (exported by the leading replica)")
            .labelNames("route")
            .register(registry);
    queueWait =
        Histogram.builder()
            .name("oneshot_build_queue_wait_seconds")
            .help("Time from enqueue to claim, for first attempts")
            .labelNames("route")
            .classicOnly()
            .classicUpperBounds(BUILD_BUCKETS)
            .register(registry);
    dispatch =
        Histogram.builder()
            .name("oneshot_build_dispatch_seconds")
            .help("Time from enqueue to the first attempt launched (Job created, process started)")
            .labelNames("route")
            .classicOnly()
            .classicUpperBounds(DISPATCH_BUCKETS)
            .register(registry);
    start =
        Histogram.builder()
            .name("oneshot_build_start_seconds")
            .help("Time from the attempt launched to provisionerd acquiring the build")
            .labelNames("route")
            .classicOnly()
            .classicUpperBounds(BUILD_BUCKETS)
            .register(registry);
    duration =
        Histogram.builder()
            .name("oneshot_build_duration_seconds")
            .help("Time from acquire to the outcome, for builds that ran")
            .labelNames("route", "outcome")
            .classicOnly()
            .classicUpperBounds(BUILD_BUCKETS)
            .register(registry);
    builds =
        Counter.builder()
            .name("oneshot_builds_total")
            .help("Builds that ended, by outcome (succeeded, failed, canceled)")
            .labelNames("route", "outcome")
            .register(registry);
    requeues =
        Counter.builder()
            .name("oneshot_build_requeues_total")
            .help("Attempts that failed for an infrastructure reason and went back to the queue")
            .labelNames("route", "reason")
            .register(registry);
    kubernetesRequests =
        Counter.builder()
            .name("oneshot_kubernetes_requests_total")
            .help(
                "Calls to the Kubernetes API by the launcher, by verb and status code (0: no answer)")
            .labelNames("verb", "code")
            .register(registry);
    runnerConflicts =
        Counter.builder()
            .name("oneshot_runner_conflicts_total")
            .help(
                "Runner calls refused because the attempt is bound to another runner (a second pod"
                    + " or process with the same token)")
            .labelNames("route")
            .register(registry);
    runnerUnproven =
        Counter.builder()
            .name("oneshot_runner_unproven_total")
            .help(
                "Runner calls refused because nothing proves they come from the runner oneshot"
                    + " launched for the token's attempt (a token used from another process or pod)")
            .labelNames("route")
            .register(registry);
    logLines =
        Counter.builder()
            .name("oneshot_log_lines_truncated_total")
            .help(
                "Log lines cut to limits.maxLogLineBytes (cut) or dropped because their build's log"
                    + " reached limits.maxLogBytes (dropped)")
            .labelNames("how")
            .register(registry);
    apiRequests =
        Counter.builder()
            .name("oneshot_api_requests_total")
            .help("HTTP API requests answered, by endpoint, method and status code")
            .labelNames("endpoint", "method", "code")
            .register(registry);
    apiDuration =
        Histogram.builder()
            .name("oneshot_api_request_duration_seconds")
            .help("Time to answer an HTTP API request (a followed log: until the stream ends)")
            .labelNames("endpoint", "method")
            .classicOnly()
            .classicUpperBounds(DISPATCH_BUCKETS)
            .register(registry);
    teamShare =
        Gauge.builder()
            .name("oneshot_team_share")
            .help(
                "A team's share of the global limit by weight, in slots: what it counts on when"
                    + " every team wants slots (exported by the leading replica)")
            .labelNames("team")
            .register(registry);
    teamRunning =
        Gauge.builder()
            .name("oneshot_team_running")
            .help(
                "A team's builds launching or running, across its routes (exported by the leading"
                    + " replica)")
            .labelNames("team")
            .register(registry);
    teamQueued =
        Gauge.builder()
            .name("oneshot_team_queued")
            .help("A team's builds waiting, across its routes (exported by the leading replica)")
            .labelNames("team")
            .register(registry);
    teamBorrowed =
        Gauge.builder()
            .name("oneshot_team_borrowed")
            .help(
                "Slots a team runs past its share and guarantee, lent by teams that leave theirs"
                    + " idle (exported by the leading replica)")
            .labelNames("team")
            .register(registry);
    teamHeld =
        Gauge.builder()
            .name("oneshot_team_held")
            .help("1 while an operator holds a team: none of its builds is claimed")
            .labelNames("team")
            .register(registry);
    routeHeld =
        Gauge.builder()
            .name("oneshot_route_held")
            .help("1 while an operator holds a route: none of its builds is claimed")
            .labelNames("route")
            .register(registry);
    balloonsWanted =
        Gauge.builder()
            .name("oneshot_balloons_wanted")
            .help(
                "Balloons the leader keeps for a route's next builds (warm room), per route"
                    + " (exported by the leading replica)")
            .labelNames("route")
            .register(registry);
    balloons =
        Gauge.builder()
            .name("oneshot_balloons")
            .help(
                "A route's balloons by state: running (holding room on a node) or pending (waiting"
                    + " for room: a node to come); exported by the leading replica")
            .labelNames("route", "state")
            .register(registry);
    balloonPreemptions =
        Counter.builder()
            .name("oneshot_balloon_preemptions_total")
            .help("Times a build's pod took a balloon's place (the scheduler preempted it)")
            .labelNames("route")
            .register(registry);
    balloonSeconds =
        Counter.builder()
            .name("oneshot_balloon_seconds_total")
            .help("Seconds of running balloons, summed over a route's balloons: their cost")
            .labelNames("route")
            .register(registry);
    cpuThrottled =
        Counter.builder()
            .name("oneshot_build_cpu_throttled_seconds_total")
            .help(
                "Time builds were throttled for their pod's CPU limit, as their provisionerd read"
                    + " the container's cgroup")
            .labelNames("route")
            .register(registry);
    dbConnections =
        Gauge.builder()
            .name("oneshot_database_connections")
            .help(
                "This replica's main pool: connections running a statement (busy) and open but"
                    + " idle (idle), read from pg_stat_activity at each scrape")
            .labelNames("state")
            .register(registry);
    dbPoolMax =
        Gauge.builder()
            .name("oneshot_database_pool_max")
            .help("The main pool's size (database.poolSize): busy at this many, statements wait")
            .register(registry);
    troubles =
        Counter.builder()
            .name("oneshot_attempt_troubles_total")
            .help(
                "Attempts that met infrastructure trouble, once per attempt and kind: oom_killed,"
                    + " evicted, image_pull, unschedulable, deadline_exceeded, disrupted,"
                    + " cannot_start")
            .labelNames("route", "reason")
            .register(registry);
    deleted =
        Counter.builder()
            .name("oneshot_builds_deleted_total")
            .help("Finished builds deleted by retention, with their logs and timelines")
            .labelNames("route")
            .register(registry);
    refused =
        Counter.builder()
            .name("oneshot_api_refused_total")
            .help(
                "API calls refused, by reason: no_token, bad_token, expired_token, revoked_token"
                    + " (401); role (403: the token's role may not); out_of_scope (404 or 403: a"
                    + " build, workspace or route the token does not cover); connections (closed:"
                    + " api.maxConnections were open), slow_headers, slow_body (closed: headers or"
                    + " body not sent within api.headerTimeout, api.bodyTimeout)")
            .labelNames("reason")
            .register(registry);
    for (String r :
        List.of(
            "no_token",
            "bad_token",
            "expired_token",
            "revoked_token",
            "role",
            "out_of_scope",
            "connections",
            "slow_headers",
            "slow_body")) {
      refused.labelValues(r);
    }
    sourceBuilds =
        Counter.builder()
            .name("oneshot_source_builds_enqueued_total")
            .help("Builds a queue source enqueued for its waiting jobs, per source and route")
            .labelNames("source", "route")
            .register(registry);
  }

  /**
   * What a queue source saw at its last look: per route, the jobs waiting that it feeds there
   * ({@code route} null: jobs whose tags no route of the source matches, one such entry per
   * source).
   */
  public record SourceJobs(String source, String route, long waiting) {}

  /**
   * Exports the queue sources (on the leader, which alone watches them): jobs waiting per route,
   * jobs no route matches, and whether the last look at each source succeeded.
   */
  public void watchSources(Supplier<List<SourceJobs>> jobs, Supplier<Map<String, Boolean>> up) {
    GaugeWithCallback.builder()
        .name("oneshot_source_jobs_waiting")
        .help(
            "Jobs waiting at a queue source for the route its tags match, at the source's last look"
                + " (the leading replica exports it)")
        .labelNames("source", "route")
        .callback(
            cb ->
                jobs.get().stream()
                    .filter(j -> j.route() != null)
                    .forEach(j -> cb.call(j.waiting(), j.source(), j.route())))
        .register(registry);
    GaugeWithCallback.builder()
        .name("oneshot_source_jobs_unrouted")
        .help(
            "Jobs waiting at a queue source whose tags no route of the source matches: they wait"
                + " until a route takes them")
        .labelNames("source")
        .callback(
            cb ->
                jobs.get().stream()
                    .filter(j -> j.route() == null)
                    .forEach(j -> cb.call(j.waiting(), j.source())))
        .register(registry);
    GaugeWithCallback.builder()
        .name("oneshot_source_up")
        .help("1 when the last look at a queue source (its database and query) succeeded")
        .labelNames("source")
        .callback(cb -> up.get().forEach((source, ok) -> cb.call(ok ? 1 : 0, source)))
        .register(registry);
  }

  public void sourceEnqueued(String source, String route, long n) {
    sourceBuilds.labelValues(source, route).inc(n);
  }

  /**
   * Exports the configured routes: each one's {@code maxConcurrent} and the global one ("running at
   * the limit" is {@code oneshot_builds_running >= on(route) oneshot_route_max_concurrent}), and
   * each one's runner-conflict counter at 0.
   */
  public void routes(Map<String, Integer> routes, int global) {
    Gauge route =
        Gauge.builder()
            .name("oneshot_route_max_concurrent")
            .help("Builds a route may run at once (routes[].maxConcurrent)")
            .labelNames("route")
            .register(registry);
    routes.forEach((name, limit) -> route.labelValues(name).set(limit));
    // A conflict is rare: its counter starts at 0, so that increase() sees the first one.
    routes.keySet().forEach(name -> runnerConflicts.labelValues(name));
    routes.keySet().forEach(name -> runnerUnproven.labelValues(name));
    Gauge.builder()
        .name("oneshot_max_concurrent")
        .help("Builds all routes may run at once (dispatch.maxConcurrent)")
        .register(registry)
        .set(global);
  }

  /**
   * Exports what the dispatcher already counts: whether it leads, the listener's reconnects and
   * notifications, and its polls (and those that found work a notification had not announced).
   */
  public void watch(
      BooleanSupplier leader,
      LongSupplier reconnects,
      LongSupplier notifications,
      LongSupplier polls,
      LongSupplier pollsWithWork) {
    GaugeWithCallback.builder()
        .name("oneshot_dispatcher_leader")
        .help("1 on the replica that claims and launches builds, 0 on the others")
        .callback(cb -> cb.call(leader.getAsBoolean() ? 1 : 0))
        .register(registry);
    CounterWithCallback.builder()
        .name("oneshot_listener_reconnects_total")
        .help("Times the LISTEN connection was lost and made again")
        .callback(cb -> cb.call(reconnects.getAsLong()))
        .register(registry);
    CounterWithCallback.builder()
        .name("oneshot_listener_notifications_total")
        .help("Notifications received on the LISTEN connection")
        .callback(cb -> cb.call(notifications.getAsLong()))
        .register(registry);
    CounterWithCallback.builder()
        .name("oneshot_dispatch_polls_total")
        .help("Dispatch cycles started by the poll tick rather than by a notification")
        .callback(cb -> cb.call(polls.getAsLong()))
        .register(registry);
    CounterWithCallback.builder()
        .name("oneshot_dispatch_polls_with_work_total")
        .help("Polls that claimed builds: work that no notification announced in time")
        .callback(cb -> cb.call(pollsWithWork.getAsLong()))
        .register(registry);
  }

  /**
   * Exports whether the launcher's platform API answered its latest call or watch, as {@code
   * oneshot_kubernetes_reachable} (for the kubernetes launcher).
   */
  public void watchLauncher(String kind, BooleanSupplier reachable) {
    GaugeWithCallback.builder()
        .name("oneshot_" + kind + "_reachable")
        .help(
            "1 while the "
                + kind
                + " API answers the dispatcher's calls and watches, 0 while it cannot be reached"
                + " (launches wait and are tried again)")
        .callback(cb -> cb.call(reachable.getAsBoolean() ? 1 : 0))
        .register(registry);
  }

  /**
   * Exports how each cluster routes launch into is doing: {@code oneshot_cluster_reachable} (its
   * API server answered the latest call) and {@code oneshot_cluster_ready} (launches can go
   * through: reachable, its credentials taken, its routes' namespaces allowed), by cluster.
   */
  public void watchClusters(
      java.util.function.Supplier<List<io.oneshot.launch.ClusterState>> clusters) {
    GaugeWithCallback.builder()
        .name("oneshot_cluster_reachable")
        .help("1 while the cluster's Kubernetes API answers the dispatcher, 0 while it cannot")
        .labelNames("cluster")
        .callback(cb -> clusters.get().forEach(c -> cb.call(c.reachable() ? 1 : 0, c.name())))
        .register(registry);
    GaugeWithCallback.builder()
        .name("oneshot_cluster_ready")
        .help(
            "1 while launches into the cluster can go through; 0 while it cannot be reached or"
                + " refuses the dispatcher (credentials, RBAC): its routes' builds wait queued")
        .labelNames("cluster")
        .callback(cb -> clusters.get().forEach(c -> cb.call(c.fine() ? 1 : 0, c.name())))
        .register(registry);
  }

  /**
   * Exports the API's requests in flight, the scrape itself included: what a replica that is
   * shutting down still has to finish.
   */
  public void watchApi(IntSupplier inFlight) {
    GaugeWithCallback.builder()
        .name("oneshot_api_requests_in_flight")
        .help("HTTP API requests being served by this replica, this scrape included")
        .callback(cb -> cb.call(inFlight.getAsInt()))
        .register(registry);
  }

  /** Sets the queue gauges from the routes' counts (on the leader). */
  public synchronized void queue(List<RouteStatus> routes) {
    Set<String> now = new HashSet<>();
    for (RouteStatus r : routes) {
      queued.labelValues(r.name()).set(r.queued());
      running.labelValues(r.name()).set(r.running());
      routeHeld.labelValues(r.name()).set(r.held() == null ? 0 : 1);
      now.add(r.name());
    }
    for (String gone : routesShown) {
      if (!now.contains(gone)) {
        queued.remove(gone);
        running.remove(gone);
        routeHeld.remove(gone);
      }
    }
    routesShown.clear();
    routesShown.addAll(now);
  }

  /**
   * Sets the teams' gauges from their counts (on the leader): share of {@code globalLimit} by
   * weight, running, queued, borrowed, held.
   */
  public synchronized void teams(List<io.oneshot.build.ShareStore.Team> teams, int globalLimit) {
    int total = teams.stream().mapToInt(io.oneshot.build.ShareStore.Team::weight).sum();
    Set<String> now = new HashSet<>();
    for (var t : teams) {
      double share = io.oneshot.build.ShareStore.share(t.weight(), total, globalLimit);
      teamShare.labelValues(t.name()).set(share);
      teamRunning.labelValues(t.name()).set(t.running());
      teamQueued.labelValues(t.name()).set(t.queued());
      teamBorrowed
          .labelValues(t.name())
          .set(io.oneshot.build.ShareStore.borrowed((int) t.running(), share, t.guaranteed()));
      teamHeld.labelValues(t.name()).set(t.held() == null ? 0 : 1);
      now.add(t.name());
    }
    for (String gone : teamsShown) {
      if (!now.contains(gone)) {
        for (Gauge g : List.of(teamShare, teamRunning, teamQueued, teamBorrowed, teamHeld)) {
          g.remove(gone);
        }
      }
    }
    teamsShown.clear();
    teamsShown.addAll(now);
  }

  /** Drops the queue gauges (this replica stopped leading). */
  public synchronized void noQueue() {
    queued.clear();
    running.clear();
    routeHeld.clear();
    routesShown.clear();
    for (Gauge g : List.of(teamShare, teamRunning, teamQueued, teamBorrowed, teamHeld)) {
      g.clear();
    }
    teamsShown.clear();
  }

  public void claimed(String route, double waitSeconds) {
    queueWait.labelValues(route).observe(waitSeconds);
  }

  public void launched(String route, double dispatchSeconds) {
    dispatch.labelValues(route).observe(dispatchSeconds);
  }

  /** First attempts on {@code route} whose launch was recorded since start. */
  public long launches(String route) {
    return dispatch.labelValues(route).getCount();
  }

  public void acquired(String route, double startSeconds) {
    start.labelValues(route).observe(startSeconds);
  }

  /** A build ended; {@code ranSeconds} is null when it never ran. */
  public void finished(String route, String outcome, Double ranSeconds) {
    builds.labelValues(route, outcome).inc();
    if (ranSeconds != null) {
      duration.labelValues(route, outcome).observe(ranSeconds);
    }
  }

  /** An API call was refused; {@code reason} is one of the help's. */
  public void refused(String reason) {
    refused.labelValues(reason).inc();
  }

  /** A second runner was refused an attempt of this route. */
  public void runnerConflict(String route) {
    runnerConflicts.labelValues(route).inc();
  }

  /** A runner call with a token of this route's was refused: nothing proves who sent it. */
  public void runnerUnproven(String route) {
    runnerUnproven.labelValues(route).inc();
  }

  public void requeued(String route, Requeue why) {
    requeues.labelValues(route, why.label).inc();
  }

  /** Log lines cut to the line limit. */
  public void logLinesCut(int n) {
    logLines.labelValues("cut").inc(n);
  }

  /** Log lines dropped at the build's log limit. */
  public void logLinesDropped(int n) {
    logLines.labelValues("dropped").inc(n);
  }

  /**
   * An API request was answered. {@code endpoint} is the route's pattern ({@code
   * /api/v1/builds/:id}), never the path itself, so that the series stay bounded.
   */
  public void apiRequest(String endpoint, String method, int code, double seconds) {
    apiRequests.labelValues(endpoint, method, Integer.toString(code)).inc();
    apiDuration.labelValues(endpoint, method).observe(seconds);
  }

  /** The main pool's use, as read at a scrape. */
  public void pool(int busy, int open, int max) {
    dbConnections.labelValues("busy").set(busy);
    dbConnections.labelValues("idle").set(Math.max(0, open - busy));
    dbPoolMax.set(max);
  }

  /** An attempt of this route met infrastructure trouble of this kind (a pod OOMKilled, …). */
  public void trouble(String route, String kind) {
    troubles.labelValues(route, kind).inc();
  }

  /** Retention deleted {@code n} finished builds of this route. */
  public void deleted(String route, int n) {
    deleted.labelValues(route).inc(n);
  }

  /**
   * The warm routes' counters, at 0 from the start: a series that exists before its first event is
   * one {@code increase()} reads from then on.
   */
  public void warmRoutes(List<String> routes) {
    for (String r : routes) {
      balloonPreemptions.labelValues(r);
      balloonSeconds.labelValues(r);
    }
  }

  /** A build of this route was throttled for its CPU limit for {@code seconds}. */
  public void cpuThrottled(String route, double seconds) {
    cpuThrottled.labelValues(route).inc(seconds);
  }

  /** A warm route's balloons as the leader counted and saw them. */
  public void balloons(String route, int wanted, int running, int pending) {
    balloonsWanted.labelValues(route).set(wanted);
    balloons.labelValues(route, "running").set(running);
    balloons.labelValues(route, "pending").set(pending);
  }

  /** This replica no longer leads: it exports no balloon gauges. */
  public void noBalloons() {
    balloonsWanted.clear();
    balloons.clear();
  }

  /** A build's pod took the place of one of the route's balloons. */
  public void balloonPreempted(String route) {
    balloonPreemptions.labelValues(route).inc();
  }

  /** Running balloons' time, added up. */
  public void balloonSeconds(String route, double seconds) {
    balloonSeconds.labelValues(route).inc(seconds);
  }

  public void kubernetes(String verb, int code) {
    kubernetesRequests.labelValues(verb, Integer.toString(code)).inc();
  }

  /** What brings the gauges read from elsewhere up to date before each scrape. */
  public void beforeScrape(Supplier<Future<Void>> refresh) {
    this.beforeScrape = refresh;
  }

  /** Refreshes what must be read at scrape time, then scrapes. */
  public Future<String> scrapeFresh() {
    return beforeScrape.get().map(v -> scrape());
  }

  /** The text exposition format, as Prometheus scrapes it. */
  public String scrape() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try {
      PrometheusTextFormatWriter.create()
          .write(out, snapshots(), io.prometheus.metrics.config.EscapingScheme.ALLOW_UTF8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString(StandardCharsets.UTF_8);
  }

  private MetricSnapshots snapshots() {
    MetricSnapshots.Builder all = MetricSnapshots.builder();
    registry.scrape().forEach(all::metricSnapshot);
    JVM.scrape().forEach(all::metricSnapshot);
    return all.build();
  }

  public static String contentType() {
    return PrometheusTextFormatWriter.CONTENT_TYPE;
  }
}
