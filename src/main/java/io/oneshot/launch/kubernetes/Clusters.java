package io.oneshot.launch.kubernetes;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.fabric8.kubernetes.client.Config;
import io.oneshot.build.Runner;
import io.oneshot.config.ConfigException;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.ClusterState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import io.oneshot.launch.Reachability;
import io.oneshot.launch.RunnerCall;
import io.oneshot.launch.RunnerProof;
import io.oneshot.launch.WarmRoom;
import io.vertx.core.Vertx;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Kubernetes launcher of a dispatcher whose routes launch into several clusters: one {@link
 * KubernetesLauncher} per cluster (its own client, limits, informers and balloons), each attempt
 * sent to its route's cluster. The dispatcher's own cluster is {@code home}; the others come from
 * {@code clusters:} (a kubeconfig file, or in-cluster).
 *
 * <p>One cluster's trouble stays its own. Each cluster is looked at ({@link
 * KubernetesLauncher#probe}: does its API server answer, take the dispatcher's credentials, let it
 * make Jobs and Secrets in its routes' namespaces) every {@link #PROBE_FINE}, and every {@link
 * #PROBE_TROUBLED} while something is wrong; a launch that meets a refusal says so at once. A
 * cluster in trouble stalls its routes ({@link #stalledRoutes}: the dispatcher claims none of their
 * builds), lists no attempts (the rescuer removes nothing there) and says why ({@link #clusters}).
 * When it is fine again, launches waiting for it are tried at once.
 *
 * <p>A cluster's kubeconfig is read again on each look: when its content changed (a Secret's
 * credential rotated), or its credentials were refused, a new launcher is made from it and started,
 * and takes over from the old one, which is then closed. A cluster that cannot be reached when the
 * dispatcher starts does not hold up the others: it is started when it answers.
 */
public final class Clusters implements Launcher {
  private static final Logger log = LoggerFactory.getLogger(Clusters.class);

  /** How often a cluster that is fine is looked at. */
  static final Duration PROBE_FINE = Duration.ofSeconds(15);

  /** How often a cluster in trouble is looked at. */
  static final Duration PROBE_TROUBLED = Duration.ofSeconds(2);

  /** Makes a cluster's launcher, its client from the cluster's settings as they are now. */
  @FunctionalInterface
  public interface Connect {
    KubernetesLauncher connect(OneshotConfig.Cluster cluster);
  }

  private final Map<String, Member> members = new LinkedHashMap<>();
  private final JobFactory templates;
  private final Map<String, String> clusterOfRoute = new ConcurrentHashMap<>();
  private final Connect connect;
  private final ScheduledExecutorService probes;
  private final List<Runnable> onFine = new CopyOnWriteArrayList<>();
  private volatile AttemptEvents events = AttemptEvents.NONE;
  private volatile boolean closed;

  /** One cluster: its settings, its launcher (null until one started), and what is wrong. */
  private final class Member {
    final OneshotConfig.Cluster spec;
    final List<String> routes;
    volatile KubernetesLauncher launcher;

    /** The digest of the kubeconfig the launcher was made from (null: none read). */
    volatile String source;

    /** Why no launcher runs (never started: it could not be reached, its kubeconfig is bad). */
    volatile String notStarted;

    volatile String unauthorized;
    final Map<String, String> forbidden = new ConcurrentHashMap<>();

    /** The latest state said, for telling when it changes. */
    volatile ClusterState state;

    volatile Future<?> nextProbe;

    Member(OneshotConfig.Cluster spec, List<String> routes) {
      this.spec = spec;
      this.routes = List.copyOf(routes);
      this.state =
          new ClusterState(spec.name(), null, true, null, Instant.now(), this.routes, Map.of());
    }

    String name() {
      return spec.name();
    }
  }

  /**
   * The clusters the routes of {@code config} launch into, each launcher made by {@code connect};
   * nothing is called on an API server until {@link #start}.
   */
  public Clusters(OneshotConfig config, Connect connect) {
    this.connect = connect;
    // The routes' templates are read and checked now, whatever cluster answers: a template that
    // cannot be used stops the start, and the route mirror needs what each asks for its container
    // before any cluster is reached.
    OneshotConfig.Kubernetes k = config.launcher().kubernetes();
    this.templates =
        new JobFactory(
            JobTemplates.load(
                k.templateDir(),
                config.routes(),
                new io.fabric8.kubernetes.client.utils.KubernetesSerialization()),
            k.namespace(),
            k.ttlSecondsAfterFinished());
    for (String name : config.usedClusters()) {
      List<String> routes =
          config.routes().stream()
              .filter(r -> r.cluster().equals(name))
              .map(OneshotConfig.Route::name)
              .toList();
      routes.forEach(r -> clusterOfRoute.put(r, name));
      members.put(name, new Member(config.cluster(name), routes));
    }
    this.probes =
        Executors.newScheduledThreadPool(
            Math.max(1, members.size()),
            Thread.ofPlatform().name("oneshot-cluster-probe").daemon().factory());
  }

  /** The clusters of {@code config}, each with a client on {@code vertx}. */
  public static Clusters create(Vertx vertx, OneshotConfig config) {
    return new Clusters(config, cluster -> connect(vertx, config, cluster));
  }

  /**
   * The launcher of {@code cluster}, its client on {@code vertx} made from the cluster's settings
   * as they are now ({@link #clientConfig}); nothing is called until it starts.
   */
  public static KubernetesLauncher connect(
      Vertx vertx, OneshotConfig config, OneshotConfig.Cluster cluster) {
    return KubernetesLauncher.create(
        config,
        cluster,
        KubernetesLauncher.client(vertx, clientConfig(cluster), cluster.requestTimeout()));
  }

  /**
   * What the client of a cluster is made from: its kubeconfig file as it is now (its context, or
   * the current one), or, for the dispatcher's own cluster and {@code inCluster}, what fabric8
   * finds (the pod's ServiceAccount, or {@code KUBECONFIG}).
   */
  static Config clientConfig(OneshotConfig.Cluster cluster) {
    if (cluster.kubeconfig() == null) {
      return Config.autoConfigure(null);
    }
    if (!Files.isReadable(cluster.kubeconfig())) {
      throw new ConfigException(
          "clusters["
              + cluster.name()
              + "].kubeconfig: cannot read "
              + cluster.kubeconfig()
              + " (the chart mounts a cluster's Secret there)");
    }
    Config config;
    try {
      config = Config.fromKubeconfig(cluster.context(), cluster.kubeconfig().toFile());
    } catch (RuntimeException e) {
      throw new ConfigException(
          "clusters["
              + cluster.name()
              + "].kubeconfig: "
              + cluster.kubeconfig()
              + " is not a kubeconfig this dispatcher can use"
              + (cluster.context() == null ? "" : " with context " + cluster.context())
              + ": "
              + ApiErrors.rootMessage(e));
    }
    Path tokenFile = null;
    try {
      tokenFile =
          tokenFile(
              cluster.kubeconfig(), Files.readAllBytes(cluster.kubeconfig()), cluster.context());
      if (tokenFile != null) {
        config.setOauthToken(Files.readString(tokenFile).strip());
      }
    } catch (IOException e) {
      throw new ConfigException(
          "clusters["
              + cluster.name()
              + "].kubeconfig: cannot read "
              + (tokenFile == null
                  ? cluster.kubeconfig()
                  : "the tokenFile it names, " + tokenFile));
    }
    return config;
  }

  /**
   * The SHA-256 of the cluster's kubeconfig now and of the certificate, key and token files it
   * names (a client certificate rotated beside an unchanged kubeconfig, as cert-manager does, is a
   * new credential too); null without one, or when it cannot be read.
   */
  static String digest(OneshotConfig.Cluster cluster) {
    if (cluster.kubeconfig() == null) {
      return null;
    }
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      byte[] kubeconfig = Files.readAllBytes(cluster.kubeconfig());
      sha.update(kubeconfig);
      for (Path file : namedFiles(cluster.kubeconfig(), kubeconfig)) {
        sha.update(file.toString().getBytes(StandardCharsets.UTF_8));
        try {
          sha.update(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file)));
        } catch (IOException e) {
          sha.update((byte) 0); // not there (yet): said when a client is made from it
        }
      }
      return HexFormat.of().formatHex(sha.digest());
    } catch (IOException e) {
      return null; // not there (yet), or not readable: said when a client is made from it
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The kubeconfig fields that name a file a client reads its credentials or trust from. */
  private static final List<String> FILE_FIELDS =
      List.of("certificate-authority", "client-certificate", "client-key", "tokenFile");

  /**
   * The {@code tokenFile} the user of the kubeconfig's context ({@code context}, or its current
   * one) names, resolved against its directory; null when none. The Kubernetes client does not read
   * it (fabric8 7.9 has the field in its model alone), so the dispatcher does; the file's token
   * wins over an inline {@code token}, as client-go's has it (k8s.io/client-go/rest/config.go,
   * {@code BearerTokenFile}: "The last successfully read value takes precedence over BearerToken").
   */
  static Path tokenFile(Path kubeconfig, byte[] content, String context) {
    JsonNode root = yaml(content);
    if (root == null) {
      return null;
    }
    String ctx = context != null ? context : root.path("current-context").asText("");
    String user = null;
    for (JsonNode c : iterable(root.path("contexts"))) {
      if (ctx.equals(c.path("name").asText())) {
        user = c.path("context").path("user").asText(null);
      }
    }
    for (JsonNode u : iterable(root.path("users"))) {
      JsonNode file = u.path("user").path("tokenFile");
      if (user != null
          && user.equals(u.path("name").asText())
          && file.isTextual()
          && !file.asText().isBlank()) {
        return beside(kubeconfig, file.asText());
      }
    }
    return null;
  }

  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  /**
   * The files a kubeconfig's clusters and users name, relative ones resolved against its own
   * directory (as kubectl and the client resolve them); none when it is not YAML.
   */
  static List<Path> namedFiles(Path kubeconfig, byte[] content) {
    JsonNode root = yaml(content);
    if (root == null) {
      return List.of(); // not YAML: said when a client is made from it
    }
    List<Path> files = new ArrayList<>();
    for (String[] at : new String[][] {{"clusters", "cluster"}, {"users", "user"}}) {
      for (JsonNode entry : iterable(root.path(at[0]))) {
        for (String field : FILE_FIELDS) {
          JsonNode name = entry.path(at[1]).path(field);
          if (name.isTextual() && !name.asText().isBlank()) {
            files.add(beside(kubeconfig, name.asText()));
          }
        }
      }
    }
    return files;
  }

  /** A kubeconfig's content as a tree; null when it is empty or not YAML. */
  private static JsonNode yaml(byte[] content) {
    try {
      return YAML.readTree(content);
    } catch (IOException e) {
      return null;
    }
  }

  /** A file a kubeconfig names, a relative name resolved against the kubeconfig's directory. */
  private static Path beside(Path kubeconfig, String name) {
    return kubeconfig.toAbsolutePath().getParent().resolve(name).normalize();
  }

  private static Iterable<JsonNode> iterable(JsonNode array) {
    return array.isArray() ? array::elements : List.of();
  }

  /**
   * What {@code oneshot dispatcher --check --reach} found of one cluster: its API server's URL and
   * version, what is wrong (null: nothing), and the routes that launch into it.
   */
  public record Reach(
      String cluster, String api, String version, String trouble, List<String> routes) {}

  /**
   * Reaches each cluster the routes of {@code config} launch into, as the dispatcher would look at
   * it ({@link KubernetesLauncher#probe}); nothing is watched or made. Blocks.
   */
  public static List<Reach> reach(Vertx vertx, OneshotConfig config) {
    List<Reach> out = new ArrayList<>();
    for (String name : config.usedClusters()) {
      OneshotConfig.Cluster cluster = config.cluster(name);
      List<String> routes =
          config.routes().stream()
              .filter(r -> r.cluster().equals(name))
              .map(OneshotConfig.Route::name)
              .toList();
      KubernetesLauncher l;
      try {
        l = connect(vertx, config, cluster);
      } catch (RuntimeException e) {
        out.add(new Reach(name, null, null, e.getMessage(), routes));
        continue;
      }
      try {
        KubernetesLauncher.Probe p = l.probe();
        out.add(new Reach(name, l.apiUrl(), p.version(), p.trouble(), routes));
      } finally {
        l.close();
      }
    }
    return out;
  }

  @Override
  public String kind() {
    return "kubernetes";
  }

  @Override
  public void events(AttemptEvents events) {
    this.events = events;
    for (Member m : members.values()) {
      KubernetesLauncher l = m.launcher;
      if (l != null) {
        l.events(events);
      }
    }
  }

  /**
   * Starts every cluster at once and waits for those that answer (their Jobs and Pods seen); one
   * that does not answer, or whose kubeconfig cannot be used, is left in trouble and started when a
   * later look finds it fine.
   */
  @Override
  public void start() {
    List<Thread> starting = new ArrayList<>();
    for (Member m : members.values()) {
      starting.add(Thread.ofPlatform().name("oneshot-cluster-start").start(() -> look(m)));
    }
    for (Thread t : starting) {
      try {
        t.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
    for (Member m : members.values()) {
      schedule(m);
    }
  }

  private void schedule(Member m) {
    if (closed) {
      return;
    }
    Duration next = m.state.fine() && m.launcher != null ? PROBE_FINE : PROBE_TROUBLED;
    lookIn(m, next);
  }

  /** Looks at the cluster after {@code delay}, then schedules the next look. */
  private void lookIn(Member m, Duration delay) {
    m.nextProbe =
        probes.schedule(
            () -> {
              try {
                look(m);
              } catch (RuntimeException e) {
                log.warn("Looking at cluster {} failed: {}.", m.name(), e.toString());
              } finally {
                schedule(m);
              }
            },
            delay.toMillis(),
            TimeUnit.MILLISECONDS);
  }

  /**
   * Looks at one cluster: makes and starts its launcher when it has none, or when its kubeconfig
   * changed or its credentials were refused and the kubeconfig says something new; then probes it,
   * and says what changed.
   */
  private void look(Member m) {
    // One look at a cluster at a time: two at once (the scheduled one and one asked for sooner)
    // would each make a launcher from a changed kubeconfig, and one would be left running.
    synchronized (m) {
      lookNow(m);
    }
  }

  private void lookNow(Member m) {
    if (closed) {
      return;
    }
    KubernetesLauncher current = m.launcher;
    String digest = digest(m.spec);
    boolean rotated = current != null && digest != null && !digest.equals(m.source);
    if (current == null || rotated) {
      KubernetesLauncher fresh;
      try {
        fresh = connect.connect(m.spec);
      } catch (RuntimeException e) {
        if (current == null) {
          m.notStarted = e.getMessage();
          assess(m);
        } else {
          // A kubeconfig being rewritten, or broken: the launcher from the last good one goes on.
          log.warn("Cluster {}: cannot use its changed kubeconfig: {}.", m.name(), e.getMessage());
        }
        return;
      }
      KubernetesLauncher.Probe probe = fresh.probe();
      if (probe.unreachable() != null || probe.unauthorized() != null) {
        // Not started until it answers and takes the credentials: its watch would only retry.
        fresh.close();
        if (current == null) {
          m.notStarted = probe.trouble();
        } else {
          // The launcher from the last good kubeconfig goes on; the new one is tried again at the
          // next look.
          log.warn(
              "Cluster {}: its changed kubeconfig cannot be used yet: {}.",
              m.name(),
              probe.trouble());
        }
        assess(m);
        return;
      }
      try {
        fresh.events(events);
        fresh.trouble(troubleOf(m, fresh));
        fresh.whenReachable(() -> assess(m));
        fresh.start();
      } catch (RuntimeException e) {
        fresh.close();
        if (current == null) {
          m.notStarted = e.getMessage();
        }
        assess(m);
        return;
      }
      m.launcher = fresh;
      m.source = digest;
      m.notStarted = null;
      m.unauthorized = null;
      if (current != null) {
        log.info(
            "Cluster {}: its kubeconfig {} (or a file it names) changed; launching"
                + " with the new one from now on.",
            m.name(),
            m.spec.kubeconfig());
        current.close();
      }
      applyProbe(m, probe);
      assess(m);
      return;
    }
    KubernetesLauncher.Probe probe = current.probe();
    applyProbe(m, probe);
    assess(m);
  }

  private void applyProbe(Member m, KubernetesLauncher.Probe probe) {
    if (probe.unreachable() != null) {
      return; // what was refused before is not known to have changed
    }
    m.unauthorized = probe.unauthorized();
    if (probe.unauthorized() == null) {
      m.forbidden.keySet().retainAll(probe.forbidden().keySet());
      m.forbidden.putAll(probe.forbidden());
    }
  }

  /**
   * What a cluster's launcher tells of refusals its calls met; a launcher that is not (or no
   * longer) the cluster's own is not listened to (its calls were made with other credentials).
   */
  private KubernetesLauncher.Trouble troubleOf(Member m, KubernetesLauncher owner) {
    return new KubernetesLauncher.Trouble() {
      @Override
      public void unauthorized(String why) {
        if (m.launcher == owner && m.unauthorized == null) {
          m.unauthorized = why;
          assess(m);
          lookSoon(m);
        }
      }

      @Override
      public void forbidden(String namespace, String why) {
        if (m.launcher == owner && !why.equals(m.forbidden.put(namespace, why))) {
          assess(m);
          lookSoon(m);
        }
      }

      @Override
      public void allowed(String namespace) {
        if (m.launcher == owner
            && (m.unauthorized != null || m.forbidden.remove(namespace) != null)) {
          m.unauthorized = null;
          assess(m);
        }
      }
    };
  }

  /** Looks at a cluster soon rather than at its next look. */
  private void lookSoon(Member m) {
    Future<?> next = m.nextProbe;
    if (!closed && next != null && next.cancel(false)) {
      lookIn(m, PROBE_TROUBLED);
    }
  }

  /**
   * Works out the cluster's state from what is known, and says what changed: in the log, and to
   * those waiting for it to be fine again.
   */
  private synchronized void assess(Member m) {
    KubernetesLauncher l = m.launcher;
    Optional<Reachability> r = l == null ? Optional.empty() : l.reachability();
    boolean reachable = r.map(Reachability::reachable).orElse(m.notStarted == null);
    String trouble;
    if (m.notStarted != null) {
      trouble = "not started: " + m.notStarted;
    } else if (!reachable) {
      trouble = r.get().detail();
    } else if (m.unauthorized != null) {
      trouble = m.unauthorized;
    } else if (!m.forbidden.isEmpty()) {
      trouble = String.join("; ", new java.util.TreeSet<>(m.forbidden.values()));
    } else {
      trouble = null;
    }
    Map<String, String> stalled = new LinkedHashMap<>();
    if (trouble != null) {
      boolean wholeCluster = m.notStarted != null || !reachable || m.unauthorized != null;
      for (String route : m.routes) {
        String ns = l == null ? null : l.namespaceOf(route);
        if (wholeCluster) {
          stalled.put(route, "cluster " + m.name() + ": " + trouble);
        } else if (ns != null && m.forbidden.containsKey(ns)) {
          stalled.put(route, "cluster " + m.name() + ": " + m.forbidden.get(ns));
        }
      }
    }
    ClusterState was = m.state;
    boolean same = java.util.Objects.equals(was.trouble(), trouble);
    ClusterState now =
        new ClusterState(
            m.name(),
            l == null ? null : l.apiUrl(),
            reachable,
            trouble,
            same ? was.since() : Instant.now(),
            m.routes,
            Map.copyOf(stalled));
    m.state = now;
    if (same) {
      return;
    }
    if (trouble != null) {
      log.warn(
          "Cluster {} is in trouble; its routes {} wait: {}.", m.name(), stalled.keySet(), trouble);
    } else {
      log.info(
          "Cluster {} is fine again (it was in trouble for {} s: {}).",
          m.name(),
          Duration.between(was.since(), now.since()).toSeconds(),
          was.trouble());
      for (Runnable listener : onFine) {
        try {
          listener.run();
        } catch (RuntimeException e) {
          log.warn("A listener failed on cluster {}'s return: {}.", m.name(), e.toString());
        }
      }
    }
  }

  @Override
  public List<ClusterState> clusters() {
    List<ClusterState> out = new ArrayList<>();
    for (Member m : members.values()) {
      // A call or watch that failed since the latest look shows at once.
      KubernetesLauncher l = m.launcher;
      if (l != null
          && l.reachability().map(Reachability::reachable).orElse(true) != m.state.reachable()) {
        assess(m);
      }
      out.add(m.state);
    }
    return out;
  }

  /** Registers who to tell when a cluster is fine again (launches waiting for it go now). */
  @Override
  public void whenReachable(Runnable listener) {
    onFine.add(listener);
  }

  /** Every cluster answered: the dispatcher's own reachability, worst first. */
  @Override
  public Optional<Reachability> reachability() {
    for (ClusterState c : clusters()) {
      if (!c.reachable()) {
        return Optional.of(new Reachability(false, c.trouble(), c.since()));
      }
    }
    return Optional.of(new Reachability(true, "", Instant.now()));
  }

  private Member memberOf(String cluster) {
    Member m = members.get(cluster == null ? OneshotConfig.HOME : cluster);
    if (m == null) {
      m = members.values().iterator().next();
    }
    return m;
  }

  /** The running launcher of the cluster, or an exception that says why there is none. */
  private KubernetesLauncher running(Member m) {
    KubernetesLauncher l = m.launcher;
    if (l == null) {
      throw new IllegalStateException("cluster " + m.name() + " " + m.state.trouble());
    }
    return l;
  }

  @Override
  public LaunchOutcome launch(Attempt a) {
    Member m = memberOf(a.route().cluster());
    KubernetesLauncher l = m.launcher;
    if (l == null) {
      return new LaunchOutcome.RetryLater(
          PROBE_TROUBLED, "cluster " + m.name() + ": " + m.state.trouble());
    }
    LaunchOutcome outcome = l.launch(a);
    if (members.size() == 1) {
      return outcome;
    }
    // Where there is more than one cluster, what a launch did says which one.
    String in = " in cluster " + m.name();
    return switch (outcome) {
      case LaunchOutcome.Launched x -> new LaunchOutcome.Launched(x.namespace(), x.detail() + in);
      case LaunchOutcome.AlreadyLaunched x ->
          new LaunchOutcome.AlreadyLaunched(x.namespace(), x.detail() + in);
      case LaunchOutcome.Rejected x ->
          new LaunchOutcome.Rejected("cluster " + m.name() + ": " + x.reason());
      case LaunchOutcome.RetryLater x ->
          new LaunchOutcome.RetryLater(x.delay(), "cluster " + m.name() + ": " + x.reason());
    };
  }

  @Override
  public AttemptState inspect(AttemptRef ref) {
    return running(memberOf(ref.cluster())).inspect(ref);
  }

  @Override
  public boolean readyToAdopt(AttemptRef ref) {
    return running(memberOf(ref.cluster())).readyToAdopt(ref);
  }

  /** Kills the attempt in its cluster; one whose cluster is not said, in every cluster. */
  @Override
  public void kill(AttemptRef ref, Duration grace, String reason) {
    if (ref.cluster() != null) {
      running(memberOf(ref.cluster())).kill(ref, grace, reason);
      return;
    }
    for (Member m : members.values()) {
      KubernetesLauncher l = m.launcher;
      if (l != null) {
        l.kill(ref, grace, reason);
      }
    }
  }

  /**
   * The attempts of every cluster that is fine, each said to be in its cluster; a cluster in
   * trouble lists none, so that nothing of it is taken for an orphan and removed meanwhile.
   */
  @Override
  public List<AttemptRef> attempts() {
    List<AttemptRef> out = new ArrayList<>();
    for (Member m : members.values()) {
      KubernetesLauncher l = m.launcher;
      if (l == null || !m.state.fine()) {
        continue;
      }
      for (AttemptRef ref : l.attempts()) {
        out.add(ref.in(m.name()));
      }
    }
    return out;
  }

  @Override
  public int launchesAtOnce() {
    return members.values().stream().mapToInt(m -> m.spec.launchesInFlight()).sum();
  }

  @Override
  public boolean keepsEndedAttempts() {
    return true;
  }

  /**
   * Proves a runner call in the cluster whose API server accepts its pod's token (a token of one
   * cluster's is refused by every other's): each cluster is asked in turn until one proves it. A
   * call none proves while a cluster could not be asked (not started yet, or not answering) is not
   * refused for good: the exception makes it a 503, which the runner tries again.
   */
  @Override
  public RunnerProof prove(RunnerCall call) {
    RunnerProof first = null;
    RuntimeException failed = null;
    for (Member m : members.values()) {
      KubernetesLauncher l = m.launcher;
      if (l == null) {
        // Not started yet (the dispatcher is starting, or the cluster could not be reached): the
        // call may be its pod's, so it is not refused for good; the runner tries again.
        failed = notWatched(m);
        continue;
      }
      try {
        RunnerProof p = l.prove(call);
        if (p instanceof RunnerProof.Proven proven) {
          return new RunnerProof.Proven(proven.runner(), proven.attempt().in(m.name()));
        }
        if (first == null) {
          first = p;
        }
      } catch (RuntimeException e) {
        failed = e;
      }
    }
    if (failed != null) {
      throw failed; // the cluster that could not be asked may be the pod's: try again later
    }
    return first;
  }

  private static IllegalStateException notWatched(Member m) {
    return new IllegalStateException(
        "cluster " + m.name() + " is not watched yet (" + m.state.trouble() + ")");
  }

  @Override
  public void removeRunner(AttemptRef ref, Runner intruder, Runner holder) {
    List<Thread> all = new ArrayList<>();
    for (Member m : members.values()) {
      KubernetesLauncher l = m.launcher;
      if (l != null && (ref.cluster() == null || ref.cluster().equals(m.name()))) {
        all.add(Thread.ofVirtual().start(() -> l.removeRunner(ref, intruder, holder)));
      }
    }
    for (Thread t : all) {
      try {
        t.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  @Override
  public List<String> warnings() {
    List<String> out = new ArrayList<>();
    for (Member m : members.values()) {
      KubernetesLauncher l = m.launcher;
      if (l != null) {
        for (String w : l.warnings()) {
          out.add(members.size() == 1 ? w : "cluster " + m.name() + ": " + w);
        }
      }
    }
    return out;
  }

  @Override
  public Map<String, Map<String, String>> templateResources(OneshotConfig.Route route) {
    return route.template() == null ? Map.of() : templates.templateResources(route);
  }

  /** Each route's balloons in its own cluster. */
  @Override
  public Optional<WarmRoom> warmRoom() {
    return Optional.of(new RoutedWarmRoom());
  }

  /**
   * Balloons kept by each route in its cluster's launcher. Where there is more than one cluster,
   * what keeps one cluster's balloons (its PriorityClass missing, the cluster in trouble) is said
   * for its routes alone, as they are held.
   */
  private final class RoutedWarmRoom implements WarmRoom {
    private final List<Listener> listeners = new CopyOnWriteArrayList<>();
    private final Set<KubernetesLauncher> heard = ConcurrentHashMap.newKeySet();
    private final Set<KubernetesLauncher> released = ConcurrentHashMap.newKeySet();
    private volatile Set<String> keep;

    private Optional<WarmRoom> of(Member m) {
      KubernetesLauncher l = m.launcher;
      if (l == null) {
        return Optional.empty();
      }
      Optional<WarmRoom> room = l.warmRoom();
      if (room.isPresent() && heard.add(l)) {
        for (Listener listener : listeners) {
          room.get().listen(listener);
        }
      }
      // A cluster started (or reconnected) after the release removes what it keeps of routes
      // no longer warm, as the others did.
      Set<String> k = keep;
      if (room.isPresent() && k != null && m.state.fine() && released.add(l)) {
        try {
          room.get().release(k);
        } catch (RuntimeException e) {
          released.remove(l);
          throw e;
        }
      }
      return room;
    }

    @Override
    public void hold(OneshotConfig.Route route, int count) {
      Member m = memberOf(clusterOfRoute.getOrDefault(route.name(), route.cluster()));
      if (!m.state.fine()) {
        throw new IllegalStateException("cluster " + m.name() + ": " + m.state.trouble());
      }
      WarmRoom room =
          of(m)
              .orElseThrow(
                  () ->
                      new IllegalStateException("cluster " + m.name() + ": " + m.state.trouble()));
      String trouble = members.size() == 1 ? null : room.trouble();
      if (trouble != null) {
        throw new IllegalStateException("cluster " + m.name() + ": " + trouble);
      }
      room.hold(route, count);
    }

    @Override
    public void release(Set<String> keep) {
      this.keep = Set.copyOf(keep);
      for (Member m : members.values()) {
        of(m);
      }
    }

    @Override
    public Map<String, Observed> observed() {
      Map<String, Observed> out = new LinkedHashMap<>();
      for (Member m : members.values()) {
        of(m).ifPresent(r -> out.putAll(r.observed()));
      }
      return out;
    }

    @Override
    public String trouble() {
      if (members.size() != 1) {
        return null; // said per route, by hold
      }
      return of(members.values().iterator().next()).map(WarmRoom::trouble).orElse(null);
    }

    @Override
    public void listen(Listener listener) {
      listeners.add(listener);
      for (KubernetesLauncher l : heard) {
        l.warmRoom().ifPresent(r -> r.listen(listener));
      }
    }
  }

  /** The cluster's launcher, for tests in this package. */
  KubernetesLauncher launcherOf(String cluster) {
    return members.get(cluster).launcher;
  }

  @Override
  public void close() {
    closed = true;
    probes.shutdownNow();
    for (Member m : members.values()) {
      // After a look under way: it may be making a launcher.
      synchronized (m) {
        KubernetesLauncher l = m.launcher;
        if (l != null) {
          l.close();
        }
      }
    }
  }
}
