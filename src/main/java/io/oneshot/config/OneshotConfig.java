package io.oneshot.config;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The dispatcher's whole configuration, loaded and validated once at start by {@link ConfigLoader}.
 * Nothing else reads the YAML.
 */
public record OneshotConfig(
    Database database,
    Api api,
    Dispatch dispatch,
    Limits limits,
    Launcher launcher,
    Logging logging,
    Retention retention,
    List<Route> routes,
    List<Source> sources,
    Encryption encryption,
    List<Team> teams,
    List<Cluster> clusters) {

  /** The name of the dispatcher's own cluster, which a route that names none launches into. */
  public static final String HOME = "home";

  /**
   * A Kubernetes API a route may launch into besides the dispatcher's own ({@link #HOME}): reached
   * through the kubeconfig file {@code kubeconfig} (its {@code context}, else its current one), or
   * from inside the cluster the dispatcher runs in ({@code inCluster}). {@code namespace} is where
   * its routes' Jobs go unless a route names one; {@code qps}, {@code burst}, {@code
   * launchesInFlight} and {@code requestTimeout} are the dispatcher's client limits for it. A
   * kubeconfig rewritten on disk (a Secret's rotated credential) is read again without a restart.
   */
  public record Cluster(
      String name,
      java.nio.file.Path kubeconfig,
      String context,
      boolean inCluster,
      String namespace,
      double qps,
      int burst,
      int launchesInFlight,
      Duration requestTimeout) {}

  /** The cluster named {@code name}; {@link #HOME} is the dispatcher's own, from its settings. */
  public Cluster cluster(String name) {
    for (Cluster c : clusters) {
      if (c.name().equals(name)) {
        return c;
      }
    }
    if (!HOME.equals(name)) {
      throw new IllegalArgumentException("no cluster named " + name);
    }
    Kubernetes k = launcher.kubernetes();
    return new Cluster(
        HOME,
        null,
        null,
        false,
        k.namespace(),
        k.qps(),
        k.burst(),
        k.launchesInFlight(),
        k.requestTimeout());
  }

  /** The clusters the routes launch into, in the order routes first name them. */
  public List<String> usedClusters() {
    java.util.Set<String> out = new java.util.LinkedHashSet<>();
    for (Route r : routes) {
      out.add(r.cluster());
    }
    return List.copyOf(out);
  }

  /**
   * Keys that encrypt workspace state and sensitive values at rest: the first seals new values,
   * every one opens what it sealed (keep old keys after a new one until nothing needs them). Empty:
   * stored as they are.
   */
  public record Encryption(List<Key> keys) {
    public static final Encryption NONE = new Encryption(List.of());
  }

  /** One encryption key: its id (written into what it seals) and its secret. */
  public record Key(String id, String secret) {
    @Override
    public String toString() {
      return "Key[" + id + "]";
    }
  }

  /**
   * A queue source: a PostgreSQL database oneshot does not own, whose waiting jobs it runs one
   * build each. It LISTENs on {@code channel} (with a poll every {@code pollInterval} as backstop)
   * and runs a read-only query that counts the waiting jobs per tag set; for each tag set it keeps
   * as many builds in flight as jobs wait, on the first of its {@code feeds} whose route the tags
   * match.
   *
   * @param kind {@code postgres} (the operator gives channel, query and the builds' input) or
   *     {@code coder} (Coder's channel, table and tag rule; builds run the coder provisioner)
   * @param url the database, from {@code databaseUrl} or the variable {@code databaseUrlEnv} names
   * @param input the builds' input (json), for {@code postgres}; null for {@code coder}
   * @param failureHold how long a build that ended without taking a job still counts as in flight:
   *     a broken route (a wrong key, an image that cannot start) gets one build per waiting job per
   *     hold, never a storm
   */
  public record Source(
      String name,
      String kind,
      String url,
      String channel,
      String query,
      Duration pollInterval,
      List<Feed> feeds,
      String input,
      Duration failureHold,
      Duration idleTimeout) {
    public static final String POSTGRES = "postgres";
    public static final String CODER = "coder";

    public boolean coder() {
      return kind.equals(CODER);
    }
  }

  /**
   * A route a source feeds; for a {@code coder} source, with the Coder organization (name or id)
   * whose jobs it takes, as the route's provisioner key belongs to one organization.
   */
  public record Feed(String route, String organization) {}

  /**
   * How long the leader keeps finished builds (with their logs and timelines): per route, those
   * finished more than {@code age} ago and those beyond the newest {@code count} are deleted, in
   * batches of {@code batch}, every {@code interval}. A build whose terraform state a workspace
   * still keeps is kept with it. Routes may set their own {@code age} and {@code count}.
   *
   * @param age null: finished builds are kept whatever their age
   * @param count 0: no cap on how many are kept
   */
  public record Retention(Duration age, int count, Duration interval, int batch) {
    /** Whether this keeps every build. */
    public boolean keepsAll() {
      return age == null && count == 0;
    }
  }

  /**
   * The dispatcher's own log: {@code text} or {@code json}, and levels by logger name ({@code
   * io.oneshot.dispatch: debug}). The environment's {@code ONESHOT_LOG_*} variables win.
   */
  public record Logging(String format, Map<String, String> levels) {}

  /**
   * Where the queue lives. {@code url} may come from {@code ONESHOT_DATABASE_URL}. {@code
   * reconnect}: how the dispatcher waits between tries to reach it (at start, and when the
   * listener's connection is lost).
   */
  public record Database(String url, int poolSize, Backoff reconnect) {}

  /**
   * The HTTP API. {@code publicUrl} is what provisionerd uses to reach it; {@code adminToken} comes
   * from the config, {@code adminTokenFile} or {@code ONESHOT_ADMIN_TOKEN}. {@code headerTimeout}:
   * how long a new connection may take to send its first request's headers; {@code
   * keepAliveTimeout}: how long a connection may sit between requests; {@code bodyTimeout}: how
   * long a request may take to send its body; {@code maxConnections}: how many connections are open
   * at once (more are closed at once).
   */
  public record Api(
      String host,
      int port,
      String publicUrl,
      String adminToken,
      Duration headerTimeout,
      Duration keepAliveTimeout,
      Duration bodyTimeout,
      int maxConnections,
      String metricsHost,
      int metricsPort) {
    /** The defaults of the limits and of the metrics port: what {@code api: {}} sets. */
    public Api(String host, int port, String publicUrl, String adminToken) {
      this(
          host,
          port,
          publicUrl,
          adminToken,
          Duration.ofSeconds(10),
          Duration.ofSeconds(60),
          Duration.ofSeconds(60),
          1000,
          null,
          -1);
    }

    /** These settings with the metrics served at {@code host:port} instead. */
    public Api withMetrics(String host, int port) {
      return new Api(
          this.host,
          this.port,
          publicUrl,
          adminToken,
          headerTimeout,
          keepAliveTimeout,
          bodyTimeout,
          maxConnections,
          host,
          port);
    }
  }

  /**
   * The claim loop and the rescuer. {@code launchRetry}: how long a launch that failed for a reason
   * worth retrying (the API server unreachable, throttled) waits before its next try; {@code
   * warmInterval}: how often the leader counts the routes' balloons again when nothing changed.
   */
  public record Dispatch(
      int maxConcurrent,
      int claimBatch,
      Duration pollInterval,
      boolean wakeOnNotify,
      Duration rescueInterval,
      Duration listenerHealthInterval,
      Duration heartbeatInterval,
      Duration leaderInterval,
      Duration shutdownGrace,
      Backoff launchRetry,
      Duration warmInterval) {}

  /**
   * Size caps, enforced by the API and (input and tags) mirrored into the database for SQL
   * producers. {@code maxLogBytes} is per build; {@code maxStateBytes} per terraform state.
   */
  public record Limits(
      int maxInputBytes,
      int maxTags,
      int maxLogLineBytes,
      long maxLogBytes,
      int maxStateBytes,
      int maxRequestBytes) {}

  /** How attempts are started: {@code local} (one OS process each) or {@code kubernetes}. */
  public record Launcher(String kind, Local local, Kubernetes kubernetes) {}

  /**
   * The Kubernetes launcher: one Job per attempt from the route's template in {@code templateDir},
   * in the route's namespace (else {@code namespace}). {@code qps} and {@code burst} limit this
   * dispatcher's calls to the API server, and at most {@code launchesInFlight} launches talk to it
   * at once; finished Jobs are removed {@code ttlSecondsAfterFinished} after they end (unless the
   * template says otherwise).
   */
  public record Kubernetes(
      String namespace,
      Path templateDir,
      double qps,
      int burst,
      int launchesInFlight,
      int ttlSecondsAfterFinished,
      Duration requestTimeout,
      String balloonPriorityClass) {}

  /**
   * The local launcher. {@code runDir} holds one directory per attempt; {@code command} replaces
   * the provisionerd command line (empty: this JVM's java and class path); {@code passEnv} names
   * environment variables handed through to provisionerd; {@code pluginCacheDir}, when set, is
   * terraform's provider plugin cache shared by every attempt ({@code TF_PLUGIN_CACHE_DIR}; not
   * given to isolated attempts, which could plant a provider in it for another team's build);
   * {@code isolation} is {@code auto}, {@code bubblewrap} or {@code none} (launch/local/Sandbox);
   * {@code readOnly}, paths besides provisionerd's own that isolated attempts may read; {@code
   * network}, {@code none} (a network namespace of each attempt's own, the API through a socket) or
   * {@code host} (the machine's network).
   */
  public record Local(
      Path runDir,
      List<String> javaOptions,
      List<String> command,
      List<String> passEnv,
      Path pluginCacheDir,
      String isolation,
      List<String> readOnly,
      String network) {}

  /**
   * A route: builds whose tags are all contained in {@code tags} go here (first route in file order
   * wins), run from {@code template}, at most {@code maxConcurrent} at a time.
   *
   * @param timeout how long one attempt may run once acquired
   * @param launchTimeout how long an attempt may take from claim to acquire
   * @param hangTimeout how old a running build's last heartbeat may get
   * @param lease how long provisionerd goes on without an accepted heartbeat before it stops its
   *     provisioner and exits (shorter than {@code hangTimeout}); the dispatcher never ends a
   *     running build on the evidence of a vanished or quiet runner before its last heartbeat is
   *     older than the lease plus {@code cancelGrace} plus a margin
   * @param cancelGrace how long a canceled provisioner gets between interrupt and kill
   * @param maxAttempts attempts per build, counting the first
   * @param retryAfterAcquire requeue script builds that fail for infrastructure reasons after
   *     provisionerd acquired them (never terraform: it could apply twice)
   * @param namespace where this route's Jobs go (Kubernetes launcher; null: the launcher's)
   * @param untagged whether builds without tags may come here (by default: when the route has no
   *     tags); an untagged build goes to the first route that takes it
   * @param retention how long this route's finished builds are kept (interval and batch are the
   *     top-level ones)
   * @param warm the warm room the route keeps for its next builds ({@link Warm#NONE}: none)
   * @param pod what a build may ask for its own pod (null: nothing)
   * @param team the team the route shares its weight with (null: a team of its own)
   * @param cluster the cluster its builds launch into ({@link OneshotConfig#HOME}: the dispatcher's
   *     own)
   */
  public record Route(
      String name,
      Map<String, String> tags,
      String template,
      String namespace,
      int maxConcurrent,
      Duration timeout,
      Duration launchTimeout,
      Duration hangTimeout,
      Duration lease,
      Duration cancelGrace,
      int maxAttempts,
      boolean retryAfterAcquire,
      boolean untagged,
      Retention retention,
      Duration drainGrace,
      List<String> passEnv,
      String network,
      Warm warm,
      PodRules pod,
      String team,
      String cluster) {
    /**
     * The variable of the dispatcher's environment that holds a route's own Coder provisioner key
     * where one environment serves every route (the local launcher): {@code
     * CODER_PROVISIONER_DAEMON_KEY_<ROUTE>}, the name in capitals, '-' as '_'. Only that route's
     * builds may get it.
     */
    public static String coderKeyVariable(String route) {
      return "CODER_PROVISIONER_DAEMON_KEY_"
          + route.toUpperCase(java.util.Locale.ROOT).replace('-', '_');
    }

    /** This route with {@code network} as its local attempts' network. */
    public Route withNetwork(String network) {
      return new Route(
          name,
          tags,
          template,
          namespace,
          maxConcurrent,
          timeout,
          launchTimeout,
          hangTimeout,
          lease,
          cancelGrace,
          maxAttempts,
          retryAfterAcquire,
          untagged,
          retention,
          drainGrace,
          passEnv,
          network,
          warm,
          pod,
          team,
          cluster);
    }

    /** How much longer than the cancel grace a build pod's termination grace must be. */
    public static final Duration GRACE_MARGIN = Duration.ofSeconds(30);

    /**
     * How long a build whose pod gets SIGTERM (deleted, evicted, its node drained) may go on before
     * the kubelet kills it: {@code drainGrace} when set, else long enough for any build of the
     * route to finish (its timeout, then its cancel grace, then {@link #GRACE_MARGIN}).
     */
    public Duration terminationGrace() {
      return drainGrace != null ? drainGrace : timeout.plus(cancelGrace).plus(GRACE_MARGIN);
    }
  }

  /**
   * The warm room a route keeps: balloons, placeholder pods of its builds' shape and image at a
   * priority below every build's, which a build's pod takes the place of (docs/warm-capacity.md).
   * How many: the most of {@code idle}, the {@code schedule} periods in force, {@code scaleFactor}
   * times the route's builds launching or running, and the {@code forecast}; never more than {@code
   * max}, the route's free slots or the free slots of {@code dispatch.maxConcurrent}.
   *
   * @param max at most this many balloons (null: as many as the route's free slots)
   * @param command what a balloon runs: something that does nothing and ends at once on SIGTERM
   */
  public record Warm(
      int idle,
      List<Period> schedule,
      double scaleFactor,
      Forecast forecast,
      Integer max,
      List<String> command) {
    /** No warm room: the default. */
    public static final Warm NONE = new Warm(0, List.of(), 0, null, 0, List.of());

    /**
     * What a balloon runs unless the route says otherwise: a shell that sleeps and exits at once on
     * SIGTERM (the shell is PID 1 in its container, where a signal without a handler is ignored,
     * and the kubelet would wait out its grace before the build's pod could take the room).
     */
    public static final List<String> DEFAULT_COMMAND =
        List.of("sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done");

    /** Whether this keeps any balloon at some time. */
    public boolean any() {
      return (max == null || max > 0)
          && (idle > 0
              || scaleFactor > 0
              || forecast != null
              || schedule.stream().anyMatch(p -> p.balloons() > 0));
    }
  }

  /**
   * A schedule period: from each time {@code cron} (five fields: minute, hour, day of month, month,
   * day of week) names in {@code timeZone}, for {@code length}, the route keeps {@code balloons}.
   */
  public record Period(String cron, Duration length, java.time.ZoneId timeZone, int balloons) {}

  /**
   * A forecast from the queue's own history: for each of the last {@code weeks} weeks, the most of
   * the route's builds that held a slot at once between that week's same time and {@code ahead}
   * later; the route keeps the {@code percentile} of those (nearest rank).
   */
  public record Forecast(int weeks, int percentile, Duration ahead) {}

  /**
   * What a route's builds may ask for their own pod (input.pod, docs/pod-settings.md): requests and
   * limits up to {@code maxRequests} and {@code maxLimits} (a size over them is clamped or refused,
   * as {@code overLimit} says), an image matching one of {@code images}, node selector entries,
   * labels and annotations whose keys and values match a rule's, tolerations of the taints in
   * {@code tolerations}, one of {@code serviceAccounts}. Patterns are globs: {@code *} any run of
   * characters, {@code ?} one, the rest as written.
   */
  public record PodRules(
      String overLimit,
      Map<String, String> maxRequests,
      Map<String, String> maxLimits,
      List<String> images,
      Map<String, List<String>> nodeSelector,
      List<String> tolerations,
      Map<String, List<String>> labels,
      Map<String, List<String>> annotations,
      List<String> serviceAccounts) {
    public static final String CLAMP = "clamp";
    public static final String REFUSE = "refuse";
  }

  /**
   * A team: routes that share one {@code weight} of the global limit when it is contended
   * (docs/fair-share.md). {@code guaranteed} slots are always its own; beyond its share it may
   * borrow idle slots up to {@code borrowLimit} (null: any); {@code maxConcurrent} caps its routes
   * together (null: their own caps alone).
   */
  public record Team(
      String name, int weight, int guaranteed, Integer borrowLimit, Integer maxConcurrent) {
    /** The team of a route that names none: itself, of weight 1. */
    public static Team of(String route) {
      return new Team(route, 1, 0, null, null);
    }
  }

  /** Every team, the routes' own included, in the order of their first route. */
  public List<Team> allTeams() {
    java.util.Map<String, Team> out = new java.util.LinkedHashMap<>();
    for (Route r : routes) {
      String name = r.team() == null ? r.name() : r.team();
      out.computeIfAbsent(
          name, n -> teams.stream().filter(t -> t.name().equals(n)).findFirst().orElse(Team.of(n)));
    }
    return List.copyOf(out.values());
  }

  public Optional<Route> route(String name) {
    return routes.stream().filter(r -> r.name().equals(name)).findFirst();
  }
}
