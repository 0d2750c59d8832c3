package io.oneshot.server;

import io.oneshot.api.ApiServer;
import io.oneshot.api.LogFollowers;
import io.oneshot.api.Metrics;
import io.oneshot.api.RunnerConflict;
import io.oneshot.build.BuildStore;
import io.oneshot.build.Database;
import io.oneshot.build.Migrator;
import io.oneshot.build.RunnerStore;
import io.oneshot.build.Sealer;
import io.oneshot.build.Sql;
import io.oneshot.config.Backoff;
import io.oneshot.config.ConfigException;
import io.oneshot.config.OneshotConfig;
import io.oneshot.dispatch.Dispatcher;
import io.oneshot.dispatch.Leadership;
import io.oneshot.dispatch.Listener;
import io.oneshot.dispatch.Pruner;
import io.oneshot.dispatch.Rescuer;
import io.oneshot.dispatch.Warmth;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.Launcher;
import io.oneshot.launch.Reachability;
import io.oneshot.launch.local.LocalCommand;
import io.oneshot.launch.local.LocalLauncher;
import io.oneshot.source.Sources;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One dispatcher replica, wired: database pool and migrations, the routes mirror, the HTTP API, the
 * listener, leadership, the claim loop, the rescuer and the launcher. {@link #start} returns once
 * the API listens; {@link #close} stops it in reverse order and leaves running attempts alone.
 */
public final class OneshotServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(OneshotServer.class);
  private static final Duration STARTUP_DATABASE_WAIT = Duration.ofMinutes(2);

  private final Vertx vertx;
  private final Database db;
  private final BuildStore store;
  private final Launcher launcher;
  private final ApiServer api;
  private final String apiUrl;
  private final Dispatcher dispatcher;
  private final Rescuer rescuer;
  private final Pruner pruner;
  private final Listener listener;
  private final Leadership leadership;
  private final Sources sources;
  private final Metrics metrics;
  private final Warmth warmth;

  private OneshotServer(
      Vertx vertx,
      Database db,
      BuildStore store,
      Launcher launcher,
      ApiServer api,
      String apiUrl,
      Dispatcher dispatcher,
      Rescuer rescuer,
      Pruner pruner,
      Listener listener,
      Leadership leadership,
      Sources sources,
      Metrics metrics,
      Warmth warmth) {
    this.warmth = warmth;
    this.sources = sources;
    this.metrics = metrics;
    this.vertx = vertx;
    this.db = db;
    this.store = store;
    this.launcher = launcher;
    this.api = api;
    this.apiUrl = apiUrl;
    this.dispatcher = dispatcher;
    this.rescuer = rescuer;
    this.pruner = pruner;
    this.listener = listener;
    this.leadership = leadership;
  }

  /** Starts with the launcher the configuration names. */
  public static OneshotServer start(OneshotConfig config) {
    return start(config, (vertx, c) -> embedding.apply(launcherFor(vertx, c)));
  }

  /**
   * What a JVM that embeds the dispatcher (a test's, which puts its own TCP forwarder in front of
   * several) wraps the configured launcher in; nothing in the configuration or the environment
   * reaches it. The identity otherwise.
   */
  public static volatile java.util.function.UnaryOperator<Launcher> embedding =
      java.util.function.UnaryOperator.identity();

  /** Starts with the given launcher (tests pass their own). */
  public static OneshotServer start(OneshotConfig config, Launcher launcher) {
    return start(config, (vertx, c) -> launcher);
  }

  /**
   * Starts with the launcher {@code launchers} makes on this server's Vert.x instance (the
   * Kubernetes client shares it).
   */
  public static OneshotServer start(
      OneshotConfig config, BiFunction<Vertx, OneshotConfig, Launcher> launchers) {
    return start(config, launchers, java.time.InstantSource.system());
  }

  /**
   * Starts with the launcher {@code launchers} makes, and {@code clock} as the time warm capacity's
   * schedule periods and forecasts are read at (tests give a clock of their own).
   */
  public static OneshotServer start(
      OneshotConfig config,
      BiFunction<Vertx, OneshotConfig, Launcher> launchers,
      java.time.InstantSource clock) {
    if (config.database().url() == null) {
      throw new ConfigException(
          "database.url: required; set it in the configuration or in ONESHOT_DATABASE_URL");
    }
    if (config.api().adminToken() == null) {
      throw new ConfigException(
          "api.adminToken: required; set ONESHOT_ADMIN_TOKEN, api.adminTokenFile or api.adminToken");
    }
    Sealer sealer =
        new Sealer(
            config.encryption().keys().stream()
                .map(k -> new Sealer.Key(k.id(), k.secret()))
                .toList());
    if (!sealer.enabled()) {
      log.warn(
          "No encryption keys (encryption.keys, ONESHOT_ENCRYPTION_KEYS): workspace state is stored"
              + " in the database as it is, and builds with sensitive values are refused.");
    }
    Vertx vertx = Vertx.vertx(new VertxOptions().setPreferNativeTransport(false));
    Database db = null;
    Launcher launcher = null;
    try {
      launcher = launchers.apply(vertx, config);
      db =
          Database.open(vertx, config.database().url(), config.database().poolSize(), "dispatcher");
      migrateWhenReachable(db, config.database().url(), config.database().reconnect());
      BuildStore store = new BuildStore(db.pool(), db.readPool(), sealer);
      // Every statement parses against the schema now, or the start fails naming its file.
      Database.await(Sql.checkAll(db.pool()));
      Database.await(io.oneshot.build.KeyChecks.verify(db.pool(), sealer));
      Metrics metrics = new Metrics();
      List<String> orphaned =
          Database.await(store.routeMirror().write(config, launcher::templateResources));
      orphaned.forEach(route -> metrics.finished(route, "failed", null));
      if (!orphaned.isEmpty()) {
        log.warn(
            "Failed {} queued builds whose route is no longer configured: routes {}.",
            orphaned.size(),
            new java.util.TreeSet<>(orphaned));
      }
      java.util.Map<String, Long> stranded =
          Database.await(store.routeMirror().strandedWorkspaces(config.routes()));
      if (!stranded.isEmpty()) {
        log.warn(
            "Routes no longer configured keep the terraform state of their workspaces (workspaces"
                + " by route: {}): a workspace is its route's, so a route renamed starts its"
                + " workspaces from no state; give the route its old name back to use them.",
            stranded);
      }
      LogFollowers followers = new LogFollowers();
      Holder holder = new Holder();
      Launcher theLauncher = launcher;
      ApiServer api =
          new ApiServer(
              vertx,
              store,
              config,
              followers,
              holder::status,
              metrics,
              conflict -> removeSecondRunner(theLauncher, conflict),
              theLauncher::prove);
      int port = Database.await(api.start());
      String apiUrl =
          config.api().publicUrl() != null
              ? config.api().publicUrl()
              : "http://" + loopbackOr(config.api().host()) + ":" + port;
      Leadership leadership =
          new Leadership(
              vertx,
              db.connectOptions("leader"),
              config.dispatch().leaderInterval(),
              leading -> {
                if (leading) {
                  holder.wakeAll();
                }
              });
      Dispatcher dispatcher =
          new Dispatcher(store, launcher, config, apiUrl, leadership::fence, metrics);
      Rescuer rescuer =
          new Rescuer(store, launcher, config, dispatcher, leadership::isLeader, metrics);
      Pruner pruner = new Pruner(store, config, leadership::isLeader, metrics);
      Sources sources = new Sources(vertx, config, store.sources(), leadership::fence, metrics);
      api.sources(sources::json);
      if (sources.anyCoder()) {
        api.coderOutcomes(sources::coderOutcome);
      }
      LaunchEvents launchEvents = new LaunchEvents(store, rescuer, metrics);
      launcher.events(launchEvents);
      Warmth warmth =
          new Warmth(
              store,
              config,
              launcher.warmRoom(),
              leadership::isLeader,
              metrics,
              launchEvents,
              clock);
      dispatcher.onClaimed(warmth::wake);
      // Everything the launcher already runs is known before the first claim or rescue.
      launcher.start();
      Map<String, Consumer<String>> channels = new HashMap<>();
      channels.put("oneshot_cancel", p -> rescuer.wake());
      channels.put("oneshot_logs", followers::notified);
      if (config.dispatch().wakeOnNotify()) {
        // Off, the dispatcher does not LISTEN for builds: only its poll finds them.
        channels.put(
            "oneshot_builds",
            p -> {
              dispatcher.wake();
              // A slot may have been freed: sources whose jobs wait on a full route top up.
              sources.wakeAll();
              // What holds a slot changed: balloons are counted from it.
              warmth.wake();
            });
      }
      Listener listener =
          new Listener(
              vertx,
              db.connectOptions("listener"),
              channels,
              () -> {
                dispatcher.wake();
                sources.wakeAll();
                followers.wakeAll();
                warmth.wake();
              },
              config.dispatch().listenerHealthInterval(),
              config.database().reconnect());
      holder.set(dispatcher, rescuer, listener, leadership, launcher, sources, warmth);
      metrics.watch(
          leadership::isLeader,
          listener::reconnects,
          listener::notifications,
          dispatcher::polls,
          dispatcher::pollsWithWork);
      Launcher la = launcher;
      if (la.reachability().isPresent()) {
        metrics.watchLauncher(
            la.kind(), () -> la.reachability().map(Reachability::reachable).orElse(true));
      }
      if (!la.clusters().isEmpty()) {
        metrics.watchClusters(la::clusters);
      }
      QueueGauges queue =
          new QueueGauges(store, metrics, leadership::isLeader, config.dispatch().maxConcurrent());
      Database pools = db;
      metrics.beforeScrape(
          () ->
              queue
                  .refresh()
                  .compose(
                      v ->
                          pools
                              .poolUse()
                              .onSuccess(u -> metrics.pool(u.busy(), u.open(), u.max()))
                              .<Void>mapEmpty()
                              .otherwiseEmpty()));
      Map<String, Integer> limits = new LinkedHashMap<>();
      config.routes().forEach(r -> limits.put(r.name(), r.maxConcurrent()));
      metrics.routes(limits, config.dispatch().maxConcurrent());
      metrics.warmRoutes(
          config.routes().stream().filter(r -> r.warm().any()).map(r -> r.name()).toList());
      listener.start();
      leadership.start();
      dispatcher.start();
      rescuer.start();
      pruner.start();
      sources.start();
      warmth.start();
      log.info(
          "oneshot is up: API on port {}, {}, provisionerd reports to {}, launcher {}, {} {}.",
          port,
          api.metricsPort() < 0
              ? "metrics on the API's port (admin token)"
              : "metrics on port " + api.metricsPort(),
          apiUrl,
          launcher.kind(),
          config.routes().size(),
          config.routes().size() == 1 ? "route" : "routes");
      return new OneshotServer(
          vertx,
          db,
          store,
          launcher,
          api,
          apiUrl,
          dispatcher,
          rescuer,
          pruner,
          listener,
          leadership,
          sources,
          metrics,
          warmth);
    } catch (RuntimeException e) {
      if (launcher != null) {
        try {
          launcher.close();
        } catch (RuntimeException ignored) {
          // the first failure is the one worth reporting
        }
      }
      if (db != null) {
        try {
          db.close();
        } catch (RuntimeException ignored) {
          // the first failure is the one worth reporting
        }
      }
      Database.await(vertx.close());
      throw e;
    }
  }

  /**
   * Has the launcher remove a refused second runner when it is its own, on a thread of its own:
   * launcher calls block, and the API calls this on its event loop.
   */
  private static void removeSecondRunner(Launcher launcher, RunnerConflict c) {
    RunnerStore.Holder h = c.holder();
    AttemptRef ref =
        new AttemptRef(h.buildId(), h.attempt(), Attempt.nameOf(h.buildId(), h.attempt()), null);
    Thread.ofVirtual()
        .name("oneshot-remove-runner")
        .start(
            () -> {
              try {
                launcher.removeRunner(ref, c.intruder(), h.runner());
              } catch (RuntimeException e) {
                log.warn(
                    "Build {}: cannot remove the second runner {}: {}.",
                    h.buildId(),
                    c.intruder().describe(),
                    e.toString());
              }
            });
  }

  /** The launcher a configuration names. */
  public static Launcher launcherFor(Vertx vertx, OneshotConfig config) {
    OneshotConfig.Local local = config.launcher().local();
    return switch (config.launcher().kind()) {
      case "local" -> {
        Path runDir =
            local.runDir() != null
                ? local.runDir()
                : Path.of(System.getProperty("java.io.tmpdir"), "oneshot-runs");
        Map<String, String> env = LocalCommand.baseEnvironment(local.passEnv());
        List<String> command = local.command();
        if (command.isEmpty()) {
          // Run from one jar (java -jar oneshot.jar dev), attempts run from a copy of it.
          List<String> cp = LocalCommand.absoluteClassPath();
          if (cp.size() == 1 && cp.get(0).endsWith(".jar")) {
            cp = LocalCommand.pinned(cp, runDir.resolve(".jars"));
          }
          command =
              LocalCommand.defaultCommand(
                  local.javaOptions(), runDir.resolve(".provisionerd.jsa"), cp);
        }
        java.util.Optional<io.oneshot.launch.local.Sandbox> sandbox;
        try {
          sandbox =
              io.oneshot.launch.local.Sandbox.of(
                  io.oneshot.launch.local.Sandbox.Mode.valueOf(
                      local.isolation().toUpperCase(java.util.Locale.ROOT)),
                  command,
                  local.readOnly(),
                  io.oneshot.launch.local.Sandbox.Network.valueOf(
                      local.network().toUpperCase(java.util.Locale.ROOT)));
        } catch (IllegalStateException e) {
          throw new ConfigException(e.getMessage());
        }
        if (local.pluginCacheDir() != null && sandbox.isPresent()) {
          log.info(
              "launcher.local.pluginCacheDir ({}) is not given to isolated attempts: a cache every"
                  + " route's builds write is a way for one to plant a provider that another runs."
                  + " Each build installs its own providers.",
              local.pluginCacheDir());
        } else if (local.pluginCacheDir() != null) {
          try {
            Files.createDirectories(local.pluginCacheDir());
          } catch (IOException e) {
            throw new ConfigException(
                "launcher.local.pluginCacheDir: cannot create "
                    + local.pluginCacheDir()
                    + ": "
                    + e.getMessage());
          }
          env.put("TF_PLUGIN_CACHE_DIR", local.pluginCacheDir().toAbsolutePath().toString());
        }
        yield new LocalLauncher(runDir, command, env, sandbox);
      }
      case "kubernetes" -> io.oneshot.launch.kubernetes.Clusters.create(vertx, config);
      default ->
          throw new ConfigException(
              "launcher.kind: '" + config.launcher().kind() + "': use local or kubernetes");
    };
  }

  private static void migrateWhenReachable(Database db, String url, Backoff reconnect) {
    long deadline = System.nanoTime() + STARTUP_DATABASE_WAIT.toNanos();
    Backoff.Sequence backoff = reconnect.sequence();
    while (true) {
      try {
        Migrator.Result r = Migrator.migrate(db);
        if (!r.applied().isEmpty()) {
          log.info("Database schema migrated from version {} to {}.", r.from(), r.to());
        }
        return;
      } catch (UncheckedIOException | io.vertx.core.VertxException e) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException(
              "cannot reach the database at " + Database.redact(url) + ": " + e.getMessage(), e);
        }
        log.warn(
            "Waiting for the database at {}: {}. Retrying in {} ms.",
            Database.redact(url),
            e.getMessage(),
            backoff.upcoming().toMillis());
        try {
          Thread.sleep(backoff.next());
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("interrupted while waiting for the database", ie);
        }
      }
    }
  }

  private static String loopbackOr(String host) {
    return host.equals("0.0.0.0") || host.equals("::") || host.isEmpty() ? "127.0.0.1" : host;
  }

  /** Late-bound parts for callbacks created before them (readiness, leadership). */
  private static final class Holder {
    private volatile Dispatcher dispatcher;
    private volatile Launcher launcher;
    private volatile Rescuer rescuer;
    private volatile Listener listener;
    private volatile Leadership leadership;
    private volatile Sources sources;
    private volatile Warmth warmth;

    void set(
        Dispatcher d, Rescuer r, Listener l, Leadership le, Launcher la, Sources so, Warmth w) {
      warmth = w;
      sources = so;
      launcher = la;
      dispatcher = d;
      rescuer = r;
      listener = l;
      leadership = le;
    }

    void wakeAll() {
      if (dispatcher != null) {
        dispatcher.wake();
        rescuer.wake();
        sources.wakeAll();
        warmth.wake();
      }
    }

    Map<String, Object> status() {
      Map<String, Object> s = new LinkedHashMap<>();
      s.put("leader", leadership != null && leadership.isLeader());
      s.put("listener", listener != null && listener.listening() ? "listening" : "reconnecting");
      Optional<Reachability> api = launcher == null ? Optional.empty() : launcher.reachability();
      api.ifPresent(
          r -> {
            Map<String, Object> k = new LinkedHashMap<>();
            k.put("reachable", r.reachable());
            if (!r.reachable()) {
              k.put("detail", r.detail());
              k.put("since", r.since().toString());
            }
            s.put(launcher.kind(), k);
          });
      List<io.oneshot.launch.ClusterState> clusters =
          launcher == null ? List.of() : launcher.clusters();
      if (!clusters.isEmpty()) {
        // Said, not counted against readiness: one cluster's trouble stalls its routes alone, and
        // the API serves the others' runners meanwhile.
        Map<String, Object> all = new LinkedHashMap<>();
        for (io.oneshot.launch.ClusterState c : clusters) {
          Map<String, Object> k = new LinkedHashMap<>();
          k.put("api", c.api());
          k.put("reachable", c.reachable());
          k.put("ready", c.fine());
          if (!c.fine()) {
            k.put("trouble", c.trouble());
            k.put("since", c.since().toString());
            k.put("stalledRoutes", c.stalled().keySet());
          }
          k.put("routes", c.routes());
          all.put(c.name(), k);
        }
        s.put("clusters", all);
      }
      if (sources != null && !sources.all().isEmpty()) {
        // Said, not counted against readiness: a source's database being down must not take the
        // API (which every route's runners need) out of its Service.
        s.put("sources", sources.readiness());
      }
      List<String> warnings = launcher == null ? List.of() : launcher.warnings();
      if (!warnings.isEmpty()) {
        s.put("launcherWarnings", warnings);
      }
      return s;
    }
  }

  public BuildStore store() {
    return store;
  }

  public Dispatcher dispatcher() {
    return dispatcher;
  }

  public ApiServer api() {
    return api;
  }

  public Rescuer rescuer() {
    return rescuer;
  }

  public Sources sources() {
    return sources;
  }

  public Pruner pruner() {
    return pruner;
  }

  /** Warm capacity: the routes' balloons, counted and kept by the leader. */
  public Warmth warmth() {
    return warmth;
  }

  public Listener listener() {
    return listener;
  }

  public Launcher launcher() {
    return launcher;
  }

  public boolean leader() {
    return leadership.isLeader();
  }

  /** The API's base URL as provisionerd reaches it. */
  public String apiUrl() {
    return apiUrl;
  }

  public int port() {
    return api.port();
  }

  /** The port {@code /metrics} is served on to its scraper. */
  public int metricsPort() {
    return api.metricsPort();
  }

  public Vertx vertx() {
    return vertx;
  }

  public Metrics metrics() {
    return metrics;
  }

  /** Stops claiming, stops serving, and releases everything; attempts keep running. */
  @Override
  public void close() {
    close(Duration.ZERO);
  }

  /**
   * Stops gracefully: leadership is released first (another replica can claim at once, and this
   * one's fence no longer passes), then claiming and rescuing stop, then the API finishes the
   * requests in flight for up to {@code drain} while it refuses new ones. Attempts keep running and
   * report to whichever replica serves the API.
   */
  public void close(Duration drain) {
    leadership.close();
    sources.close();
    dispatcher.close();
    rescuer.close();
    pruner.close();
    warmth.close();
    if (!drain.isZero()) {
      int left = api.drain(drain);
      if (left > 0) {
        log.warn(
            "{} API requests were still running after {} s; closing them.",
            left,
            drain.toSeconds());
      }
    }
    api.close();
    listener.close();
    launcher.close();
    db.close();
    Database.await(vertx.close());
    log.info("oneshot stopped.");
  }
}
