package io.oneshot.launch.kubernetes;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.fabric8.kubernetes.api.model.DeletionPropagation;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.Status;
import io.fabric8.kubernetes.api.model.authentication.TokenReview;
import io.fabric8.kubernetes.api.model.authentication.TokenReviewBuilder;
import io.fabric8.kubernetes.api.model.authentication.TokenReviewStatus;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobCondition;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.fabric8.kubernetes.client.vertx.VertxHttpClientFactory;
import io.oneshot.build.Runner;
import io.oneshot.config.OneshotConfig;
import io.oneshot.config.Units;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import io.oneshot.launch.Reachability;
import io.oneshot.launch.RunnerCall;
import io.oneshot.launch.RunnerProof;
import io.vertx.core.Vertx;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs each attempt as a Kubernetes Job made from its route's template ({@link JobFactory}), with
 * the attempt's token in a Secret the Job owns. Creation is idempotent by the attempt's
 * deterministic name; the outcome of every API call is classified for the dispatcher (created,
 * already there, refused for good, or to be retried). Jobs and their Pods are watched with
 * informers filtered by the {@code oneshot.io/build} label, in every namespace the routes use: what
 * explains a wait or a failure goes into the build's log and timeline, and a Job or pod that ended
 * or went away wakes the rescuer (a Job being created, or a pod starting, gives it nothing to do:
 * in a burst, waking it for those made it read every live build a thousand times a second). The
 * token Secrets are not watched: see {@link #SECRET_SWEEP}. Every call here blocks; the dispatcher
 * makes them from its own threads.
 */
public final class KubernetesLauncher implements Launcher {
  private static final Logger log = LoggerFactory.getLogger(KubernetesLauncher.class);

  private final KubernetesClient client;
  private final JobFactory factory;
  private final RateLimiter limiter;
  private final int launchesInFlight;
  private final ClusterWatch watch;
  private final Balloons balloons;
  private final DroppedFields dropped = new DroppedFields();
  private final ApiReachability api;
  private volatile AttemptEvents events = AttemptEvents.NONE;
  private final String apiBase;
  private final long requestTimeoutMs;

  /**
   * How often the rescuer's pass also lists the token Secrets, for one left without its Job: its
   * dispatcher stopped between the two creates, its launch was given up after the Secret was made,
   * or its Job never became its owner and is gone. Such a Secret holds the token of an attempt that
   * has ended, which the API refuses: it is clutter, not a risk, and a minute is soon enough. The
   * Secrets are not watched: an informer heard of each one twice a launch (made, then owned), which
   * the API server sent and the dispatcher decoded, and it kept every live token in this process.
   */
  static final Duration SECRET_SWEEP = Duration.ofMinutes(1);

  /**
   * When the Secrets are next listed ({@link System#nanoTime}): from the first pass on; guarded by
   * {@code this}.
   */
  private long nextSweep = System.nanoTime();

  KubernetesLauncher(
      KubernetesClient client,
      JobFactory factory,
      RateLimiter limiter,
      int launchesInFlight,
      Set<String> namespaces,
      BalloonFactory balloonFactory,
      List<OneshotConfig.Route> routes) {
    this.client = client;
    this.factory = factory;
    this.limiter = limiter;
    this.launchesInFlight = launchesInFlight;
    String base = String.valueOf(client.getMasterUrl());
    this.api = new ApiReachability(base);
    this.apiBase = base.endsWith("/") ? base : base + "/";
    int timeout = client.getConfiguration().getRequestTimeout();
    this.requestTimeoutMs = timeout > 0 ? timeout : 10_000;
    this.watch = new ClusterWatch(client, namespaces, api);
    this.balloons =
        balloonFactory == null
            ? null
            : new Balloons(client, balloonFactory, this::call, routes, watch);
    for (OneshotConfig.Route r : routes) {
      routeNamespaces.put(r.name(), factory.namespaceOf(r));
    }
  }

  /** The namespace of each route's Jobs. */
  private final Map<String, String> routeNamespaces = new java.util.HashMap<>();

  /** The namespace the route's Jobs go to; null for a route this launcher does not serve. */
  String namespaceOf(String route) {
    return routeNamespaces.get(route);
  }

  /**
   * Loads and checks the routes' templates, then makes the launcher (nothing is called on the API
   * server until {@link #start}).
   */
  public static KubernetesLauncher create(OneshotConfig config, KubernetesClient client) {
    OneshotConfig.Kubernetes k = config.launcher().kubernetes();
    return create(
        config, config.routes(), k.namespace(), k.qps(), k.burst(), k.launchesInFlight(), client);
  }

  /**
   * The launcher of one cluster: its routes' templates, its namespace (where a route that names
   * none launches) and its client limits; nothing is called until {@link #start}.
   */
  public static KubernetesLauncher create(
      OneshotConfig config, OneshotConfig.Cluster cluster, KubernetesClient client) {
    return create(
        config,
        config.routes().stream().filter(r -> r.cluster().equals(cluster.name())).toList(),
        cluster.namespace(),
        cluster.qps(),
        cluster.burst(),
        cluster.launchesInFlight(),
        client);
  }

  private static KubernetesLauncher create(
      OneshotConfig config,
      List<OneshotConfig.Route> routes,
      String namespace,
      double qps,
      int burst,
      int launchesInFlight,
      KubernetesClient client) {
    OneshotConfig.Kubernetes k = config.launcher().kubernetes();
    // Read with a serialization of their own: the client's decodes a Job read by its kind as the
    // watch does, without its spec (WatchedKinds).
    JobTemplates templates =
        JobTemplates.load(k.templateDir(), routes, new KubernetesSerialization());
    KubernetesSerialization serialization = client.getKubernetesSerialization();
    Set<String> namespaces = new TreeSet<>();
    for (OneshotConfig.Route r : routes) {
      namespaces.add(r.namespace() != null ? r.namespace() : namespace);
    }
    if (namespaces.isEmpty()) {
      namespaces.add(namespace);
    }
    return new KubernetesLauncher(
        client,
        new JobFactory(templates, namespace, k.ttlSecondsAfterFinished(), serialization),
        new RateLimiter(qps, burst),
        launchesInFlight,
        namespaces,
        new BalloonFactory(templates, namespace, k.balloonPriorityClass(), serialization),
        routes);
  }

  /**
   * A client as fabric8 finds its configuration (kubeconfig, or the pod's service account), on our
   * Vert.x instance, with fabric8's own retries off: the dispatcher decides what to retry.
   */
  public static KubernetesClient client(Vertx vertx, OneshotConfig config) {
    return client(vertx, Config.autoConfigure(null), config);
  }

  /**
   * The dispatcher's client to the API server {@code found} describes (a kubeconfig read by the
   * caller, say), with the same settings as {@link #client(Vertx, OneshotConfig)}.
   */
  public static KubernetesClient client(Vertx vertx, Config found, OneshotConfig config) {
    return client(vertx, found, config.launcher().kubernetes().requestTimeout());
  }

  /** {@link #client(Vertx, Config, OneshotConfig)} with {@code requestTimeout}. */
  public static KubernetesClient client(Vertx vertx, Config found, Duration requestTimeout) {
    Config c =
        new ConfigBuilder(found)
            .withRequestRetryBackoffLimit(0)
            .withRequestTimeout((int) requestTimeout.toMillis())
            .withConnectionTimeout(10_000)
            .build();
    return new KubernetesClientBuilder()
        .withConfig(c)
        .withHttpClientFactory(new VertxHttpClientFactory(vertx))
        .build();
  }

  @Override
  public String kind() {
    return "kubernetes";
  }

  @Override
  public void events(AttemptEvents events) {
    this.events = events;
    watch.events(events);
  }

  @Override
  public void start() {
    readServerVersion();
    watch.start();
  }

  /** The API server's version, for the log and for what it is told when it drops Job fields. */
  private void readServerVersion() {
    try {
      var v = call("get", client::getKubernetesVersion);
      if (v != null) {
        dropped.serverVersion(v.getGitVersion());
        log.info("Kubernetes API server {} at {}.", v.getGitVersion(), client.getMasterUrl());
      }
    } catch (KubernetesClientException e) {
      log.warn(
          "Cannot read the Kubernetes API server's version at {}: {}.",
          client.getMasterUrl(),
          ApiErrors.message(e));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public Map<String, Map<String, String>> templateResources(OneshotConfig.Route route) {
    return route.template() == null ? Map.of() : factory.templateResources(route);
  }

  /** The routes' balloons: Deployments of placeholder pods of each warm route's shape. */
  @Override
  public Optional<io.oneshot.launch.WarmRoom> warmRoom() {
    return Optional.ofNullable(balloons);
  }

  @Override
  public Optional<Reachability> reachability() {
    return Optional.of(api.state());
  }

  @Override
  public void whenReachable(Runnable listener) {
    api.whenReachable(listener);
  }

  @Override
  public List<String> warnings() {
    String balloonTrouble = balloons == null ? null : balloons.lastTrouble();
    if (balloonTrouble == null) {
      return dropped.warnings();
    }
    List<String> all = new ArrayList<>(dropped.warnings());
    all.add("balloons are not kept: " + balloonTrouble);
    return all;
  }

  /**
   * What the API server's TokenReview says of a bound ServiceAccount token in {@code
   * status.user.extra}: the pod it is bound to (kubernetes v1.20.2 pkg/serviceaccount/claims.go,
   * {@code validator.Validate}, returns the pod's name and UID from the token's private claims;
   * pkg/serviceaccount/util.go, {@code ServiceAccountInfo.UserInfo}, puts them in {@code extra}
   * under these keys).
   */
  static final String POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name";

  static final String POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid";

  /**
   * The runner of a call is the pod this launcher's Job made for the attempt, proven by the API
   * server: the call carries the pod's projected ServiceAccount token for oneshot's audience
   * ({@link JobFactory#AUDIENCE}), which a TokenReview accepts only while that pod exists with the
   * UID the token is bound to; the pod must then carry its attempt's labels and be controlled by
   * the attempt's Job, which this launcher made. The pod's name or UID as the runner states them
   * count for nothing. Blocks (one TokenReview, and a pod read when the informer has not seen it).
   */
  @Override
  public RunnerProof prove(RunnerCall call) {
    if (call.proof() == null || call.proof().isBlank()) {
      return new RunnerProof.Unproven(
          "it carries no token of its pod (the header "
              + "Oneshot-Runner-Proof: the projected ServiceAccount token oneshot mounts in build"
              + " pods)");
    }
    String key = io.oneshot.build.BuildToken.hex(io.oneshot.build.BuildToken.hash(call.proof()));
    long now = System.nanoTime();
    ProvenPod known = provenPods.get(key);
    if (known != null && now - known.at() < PROOF_KEPT.toNanos()) {
      return known.proof();
    }
    RunnerProof proof = review(call.proof());
    if (proof instanceof RunnerProof.Proven p) {
      if (provenPods.size() > 10_000) {
        provenPods.values().removeIf(v -> now - v.at() >= PROOF_KEPT.toNanos());
      }
      provenPods.put(key, new ProvenPod(p, now));
    }
    return proof;
  }

  /**
   * How long a reviewed pod token stays proven here: its lifetime. The API server stops accepting a
   * bound token a minute after its pod's deletion began (pkg/serviceaccount/claims.go: a pod whose
   * deletionTimestamp is older than the 60 s leeway invalidates it), while a drained build runs on
   * for its whole termination grace: the proof it gave stays good for as long as its token would.
   */
  static final Duration PROOF_KEPT = Duration.ofSeconds(JobFactory.PROOF_SECONDS);

  private record ProvenPod(RunnerProof.Proven proof, long at) {}

  /** Pod tokens proven, by the SHA-256 of the token (the token itself is not kept). */
  private final Map<String, ProvenPod> provenPods = new java.util.concurrent.ConcurrentHashMap<>();

  private RunnerProof review(String token) {
    TokenReview review =
        new TokenReviewBuilder()
            .withNewSpec()
            .withToken(token)
            .withAudiences(JobFactory.AUDIENCE)
            .endSpec()
            .build();
    TokenReview answer;
    try {
      answer = call("create", () -> client.authentication().v1().tokenReviews().create(review));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while reviewing a pod's token", e);
    } catch (KubernetesClientException e) {
      if (e.getCode() == 403) {
        log.error(
            "The API server refused oneshot's TokenReview (403): the dispatcher's ServiceAccount"
                + " needs create on tokenreviews.authentication.k8s.io (the chart's ClusterRole)."
                + " No build pod can prove who it is until then.");
      }
      throw e;
    }
    TokenReviewStatus st = answer == null ? null : answer.getStatus();
    if (st == null || !Boolean.TRUE.equals(st.getAuthenticated())) {
      return new RunnerProof.Unproven(
          "the API server does not accept its pod token"
              + (st != null && st.getError() != null ? " (" + st.getError() + ")" : ""));
    }
    if (st.getAudiences() != null
        && !st.getAudiences().isEmpty()
        && !st.getAudiences().contains(JobFactory.AUDIENCE)) {
      return new RunnerProof.Unproven("its token is not for oneshot's audience");
    }
    Map<String, List<String>> extra =
        st.getUser() == null || st.getUser().getExtra() == null
            ? Map.of()
            : st.getUser().getExtra();
    String podName = first(extra.get(POD_NAME_EXTRA));
    String podUid = first(extra.get(POD_UID_EXTRA));
    String user = st.getUser() == null ? null : st.getUser().getUsername();
    String[] sa = user == null ? new String[0] : user.split(":");
    if (podName == null || podUid == null || sa.length != 4 || !sa[1].equals("serviceaccount")) {
      return new RunnerProof.Unproven(
          "its token (" + user + ") is not a ServiceAccount token bound to a pod");
    }
    String ns = sa[2];
    Pod pod = watch.cachedPod(ns, podName);
    if (pod == null || !podUid.equals(pod.getMetadata().getUid())) {
      try {
        pod = call("get", () -> client.pods().inNamespace(ns).withName(podName).get());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while reading a pod", e);
      }
    }
    String named = ns + "/" + podName + " (uid " + podUid + ")";
    if (pod == null || !podUid.equals(pod.getMetadata().getUid())) {
      return new RunnerProof.Unproven("its token is bound to pod " + named + ", which is gone");
    }
    Optional<AttemptRef> ref = ClusterWatch.refOf(pod);
    if (ref.isEmpty()) {
      return new RunnerProof.Unproven(
          "its token is bound to pod " + named + ", which is no attempt's");
    }
    Job job = watch.cachedJob(ns, ref.get().name());
    if (job == null) {
      // Not seen yet: a dispatcher just started serves runner calls before its watch has synced.
      try {
        job =
            call(
                "get",
                () -> client.batch().v1().jobs().inNamespace(ns).withName(ref.get().name()).get());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while reading a Job", e);
      }
    }
    Job theJob = job;
    boolean ownJob =
        theJob != null
            && pod.getMetadata().getOwnerReferences() != null
            && pod.getMetadata().getOwnerReferences().stream()
                .anyMatch(
                    o ->
                        "Job".equals(o.getKind())
                            && Boolean.TRUE.equals(o.getController())
                            && ref.get().name().equals(o.getName())
                            && theJob.getMetadata().getUid().equals(o.getUid()));
    if (!ownJob) {
      return new RunnerProof.Unproven(
          "its token is bound to pod "
              + named
              + ", which carries the labels of attempt "
              + ref.get().name()
              + " but is not a pod of the Job oneshot made for it");
    }
    return new RunnerProof.Proven(
        new Runner("pod-" + podUid, podName, podUid, null, null), ref.get());
  }

  private static String first(List<String> values) {
    return values == null || values.isEmpty() ? null : values.get(0);
  }

  /**
   * Deletes the pod of a second runner the API refused: only a pod of this attempt's Job (by its
   * labels) whose UID is the one the runner gave, and never the pod of the runner that holds it.
   *
   * <p>The pod is deleted once its container has exited (a refused provisionerd exits at once), or
   * after {@link #REMOVAL_WAIT}: a Job controller that replaces deleted pods at once (no {@code
   * podReplacementPolicy}) would answer the deletion of a running pod with yet another pod, while
   * an exited one counts as the Job's failure and is not replaced. Blocks; called off the event
   * loop.
   */
  @Override
  public void removeRunner(AttemptRef ref, Runner intruder, Runner holder) {
    if (intruder.pod() == null || intruder.pod().equals(holder.pod())) {
      return;
    }
    Pod p;
    try {
      p = watch.awaitPod(intruder.pod(), JobStatus::exited, REMOVAL_WAIT);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    if (p == null) {
      log.warn(
          "Build {}: the second runner names pod {}, which is gone or was never seen; left alone.",
          ref.buildId(),
          intruder.pod());
      return;
    }
    Optional<AttemptRef> of = ClusterWatch.refOf(p);
    boolean ours =
        of.isPresent()
            && of.get().buildId() == ref.buildId()
            && of.get().attempt() == ref.attempt()
            && (intruder.podUid() == null || intruder.podUid().equals(p.getMetadata().getUid()));
    if (!ours) {
      log.warn(
          "Build {}: the second runner names pod {}, which is not a pod of attempt {}; left"
              + " alone.",
          ref.buildId(),
          intruder.pod(),
          ref.name());
      return;
    }
    String ns = p.getMetadata().getNamespace();
    try {
      call(
          "delete",
          () -> client.pods().inNamespace(ns).withName(intruder.pod()).withGracePeriod(0).delete());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    log.warn(
        "Build {} (attempt {}): deleted pod {}/{}, a second runner of the attempt, which {}"
            + " holds.",
        ref.buildId(),
        ref.attempt(),
        ns,
        intruder.pod(),
        holder.describe());
    events.note(
        of.get(),
        AttemptEvents.Note.warn(
            "deleted pod " + intruder.pod() + ": a second pod of this attempt (refused)"));
  }

  /** How long a refused runner's pod is given to exit before it is deleted anyway. */
  static final Duration REMOVAL_WAIT = Duration.ofSeconds(20);

  /** One call to the API server: rate-limited, and counted with the status it got. */
  private <T> T call(String verb, Supplier<T> request) throws InterruptedException {
    limiter.acquire(1);
    return send(verb, request);
  }

  /** One call to the API server whose turn under the rate limit was already taken; counted. */
  private <T> T send(String verb, Supplier<T> request) {
    try {
      T result = request.get();
      events.apiCall(verb, verb.equals("create") ? 201 : 200);
      api.answered();
      return result;
    } catch (KubernetesClientException e) {
      events.apiCall(verb, Math.max(0, e.getCode()));
      String refused = ApiErrors.credentialRefused(api, e);
      if (refused != null) {
        trouble.unauthorized(refused);
      }
      if (e.getCode() > 0) {
        api.answered();
      } else {
        api.unanswered(ApiErrors.rootMessage(e));
      }
      throw e;
    }
  }

  /** {@code launchesInFlight}: the dispatcher makes no more launch calls than this at once. */
  @Override
  public int launchesAtOnce() {
    return launchesInFlight;
  }

  /**
   * Creates the attempt's Job, then its token Secret owned by the Job from the start: two requests
   * (docs/performance.md says what each is for). Both turns under the rate limit are taken before
   * the first, so that the Secret follows its Job at once, not behind other launches' requests: a
   * pod whose Secret is not there yet when its kubelet starts it waits for the kubelet's next try
   * (about 10 s), and the Job controller, the scheduler and the kubelet take longer than one
   * request to get that far.
   */
  @Override
  public LaunchOutcome launch(Attempt a) {
    String ns = factory.namespace(a);
    String where = ns + "/" + a.name();
    boolean made = false;
    try {
      limiter.acquire(2);
      String uid;
      boolean existed = false;
      try {
        byte[] created = send("create", () -> post(jobsPath(ns), factory.jobJson(a)));
        uid = metadataUid(created);
        made = true;
        if (checked.add(a.route().name())) {
          // What the server keeps of a route's Job is the same for each of its attempts.
          dropped.check(
              factory.job(a),
              client
                  .getKubernetesSerialization()
                  .unmarshal(new String(created, StandardCharsets.UTF_8), Job.class));
        }
      } catch (KubernetesClientException e) {
        if (e.getCode() != 409) {
          throw e;
        }
        Job found =
            call("get", () -> client.batch().v1().jobs().inNamespace(ns).withName(a.name()).get());
        if (found == null) {
          return new LaunchOutcome.RetryLater(
              Duration.ofSeconds(1), "Job " + where + " is being deleted; trying again");
        }
        if (!a.ref()
            .equals(
                ClusterWatch.refOf(found)
                    .map(r -> new AttemptRef(r.buildId(), r.attempt(), r.name(), null))
                    .orElse(null))) {
          return new LaunchOutcome.Rejected(
              "a Job named " + where + " exists and is not this attempt's; delete it");
        }
        uid = found.getMetadata().getUid();
        existed = true;
        made = true;
      }
      putSecret(a, ns, uid);
      trouble.allowed(ns);
      return existed
          ? new LaunchOutcome.AlreadyLaunched(ns, "Job " + where + " exists")
          : new LaunchOutcome.Launched(ns, "Job " + where + " created");
    } catch (KubernetesClientException e) {
      LaunchOutcome refused = ApiErrors.classify(e, where, api);
      if (made && refused instanceof LaunchOutcome.Rejected) {
        dropJob(ns, a.name());
      }
      String credential = ApiErrors.credentialRefused(api, e);
      if (credential != null) {
        trouble.unauthorized(credential);
      } else if (e.getCode() == 403 && !ApiErrors.quota(ApiErrors.message(e))) {
        trouble.forbidden(ns, ApiErrors.forbidden(ApiErrors.message(e)));
      }
      return refused;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new LaunchOutcome.RetryLater(Duration.ofSeconds(1), "interrupted");
    }
  }

  /** The routes whose Job's fields the server kept, or dropped, were looked at. */
  private final Set<String> checked = java.util.concurrent.ConcurrentHashMap.newKeySet();

  private String jobsPath(String ns) {
    return "apis/batch/v1/namespaces/" + ns + "/jobs";
  }

  /**
   * POSTs a JSON object the launch wrote ({@link JobFactory#jobJson}) to {@code path} under the API
   * server's URL, through the client's own HTTP client (its authentication, TLS and timeouts): the
   * typed client would serialize a model object by reflection and read the whole answer back into
   * one, where the launch needs only the answer's uid. Returns the answer's body; throws as the
   * typed client does, with the server's Status.
   */
  private byte[] post(String path, String json) {
    var http = client.getHttpClient();
    var request =
        http.newHttpRequestBuilder()
            .uri(apiBase + path)
            .timeout(requestTimeoutMs, TimeUnit.MILLISECONDS)
            .post("application/json", json.getBytes(StandardCharsets.UTF_8))
            .build();
    io.fabric8.kubernetes.client.http.HttpResponse<byte[]> r;
    try {
      r =
          http.sendAsync(request, byte[].class)
              .get(requestTimeoutMs + 1_000, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KubernetesClientException("interrupted", e);
    } catch (ExecutionException e) {
      throw new KubernetesClientException(
          "POST " + apiBase + path + ": " + ApiErrors.rootMessage(e), e.getCause());
    } catch (TimeoutException e) {
      throw new KubernetesClientException("POST " + apiBase + path + ": timed out", e);
    }
    if (r.isSuccessful()) {
      return r.body();
    }
    Status status = null;
    try {
      status =
          client
              .getKubernetesSerialization()
              .unmarshal(new String(r.body(), StandardCharsets.UTF_8), Status.class);
    } catch (RuntimeException notStatus) {
      // Not a Status (a proxy's page): the code alone, below.
    }
    if (status == null || status.getCode() == null || status.getCode() != r.code()) {
      status =
          new io.fabric8.kubernetes.api.model.StatusBuilder()
              .withCode(r.code())
              .withMessage(
                  status != null && status.getMessage() != null
                      ? status.getMessage().strip()
                      : new String(r.body(), StandardCharsets.UTF_8).strip())
              .build();
    }
    status = ApiErrors.withRetryAfter(status, r.header("Retry-After"));
    throw new KubernetesClientException(
        "POST " + apiBase + path + " answered " + r.code(), r.code(), status);
  }

  /** {@code metadata.uid} of a JSON object, read without building the object. */
  static String metadataUid(byte[] json) {
    try (JsonParser p = JSON.createParser(json)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String field = p.currentName();
        p.nextToken();
        if (!field.equals("metadata") || p.currentToken() != JsonToken.START_OBJECT) {
          p.skipChildren();
          continue;
        }
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          String f = p.currentName();
          p.nextToken();
          if (f.equals("uid")) {
            return p.getValueAsString();
          }
          p.skipChildren();
        }
        return null;
      }
      return null;
    } catch (java.io.IOException e) {
      throw new KubernetesClientException("cannot read the API server's answer: " + e.getMessage());
    }
  }

  private static final JsonFactory JSON = new JsonFactory();

  /**
   * Deletes the Job of a launch whose Secret was refused for good: its pod could never start. One
   * that cannot be deleted now is removed by the rescuer, as an attempt no live build needs.
   */
  private void dropJob(String ns, String name) {
    try {
      deleteJob(ns, name, Duration.ZERO);
    } catch (KubernetesClientException e) {
      log.warn(
          "Cannot delete Job {}/{} of a refused launch: {}. It is removed later.",
          ns,
          name,
          e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Deletes a Job and, in the background, its pods, which get {@code grace} to stop. */
  private void deleteJob(String ns, String name, Duration grace) throws InterruptedException {
    call(
        "delete",
        () ->
            client
                .batch()
                .v1()
                .jobs()
                .inNamespace(ns)
                .withName(name)
                .withPropagationPolicy(DeletionPropagation.BACKGROUND)
                .withGracePeriod(grace.toSeconds())
                .delete());
  }

  /**
   * Creates the attempt's token Secret, owned by its Job (of uid {@code jobUid}); when it exists (a
   * launch tried again, or a launch with a renewed token), sets its token and owner. Its turn under
   * the rate limit is taken.
   */
  private void putSecret(Attempt a, String ns, String jobUid) throws InterruptedException {
    try {
      send(
          "create",
          () -> post("api/v1/namespaces/" + ns + "/secrets", factory.secretJson(a, jobUid)));
    } catch (KubernetesClientException e) {
      if (e.getCode() != 409) {
        throw e;
      }
      Secret secret = factory.secret(a, jobUid);
      mergePatch(
          secret,
          Map.of(
              "data",
              secret.getData(),
              "metadata",
              Map.of("ownerReferences", secret.getMetadata().getOwnerReferences())));
    }
  }

  /**
   * Whether the attempt's token Secret exists: a Job found without its launch recorded may have
   * been made by a dispatcher that stopped before its Secret; such a Job's pod waits for it. Listed
   * by the attempt's labels: the Role grants no {@code get} on Secrets.
   */
  @Override
  public boolean readyToAdopt(AttemptRef ref) {
    String ns = namespaceOf(ref);
    try {
      return call(
              "list",
              () ->
                  client
                      .secrets()
                      .inNamespace(ns)
                      .withLabel(JobFactory.BUILD, Long.toString(ref.buildId()))
                      .withLabel(JobFactory.ATTEMPT, Integer.toString(ref.attempt()))
                      .list())
          .getItems()
          .stream()
          .anyMatch(s -> s.getMetadata().getName().equals(ref.name()));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted");
    }
  }

  /** Merges {@code patch} into the Secret in one request ({@code edit} would read it first). */
  private void mergePatch(Secret secret, Map<String, Object> patch) throws InterruptedException {
    String body = client.getKubernetesSerialization().asJson(patch);
    call(
        "patch",
        () ->
            client
                .secrets()
                .inNamespace(secret.getMetadata().getNamespace())
                // With the object at hand (not only its name), the client does not read it first.
                .resource(secret)
                .patch(PatchContext.of(PatchType.JSON_MERGE), body));
  }

  /** The attempt's namespace; one recorded without it is in the first one watched. */
  private String namespaceOf(AttemptRef ref) {
    return ref.namespace() != null ? ref.namespace() : watch.firstNamespace();
  }

  @Override
  public boolean keepsEndedAttempts() {
    return true;
  }

  @Override
  public AttemptState inspect(AttemptRef ref) {
    String ns = namespaceOf(ref);
    Job job = watch.cachedJob(ns, ref.name());
    if (job == null) {
      try {
        job =
            call(
                "get", () -> client.batch().v1().jobs().inNamespace(ns).withName(ref.name()).get());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted");
      }
    }
    if (job == null) {
      return new AttemptState.Missing("Job " + ns + "/" + ref.name() + " does not exist");
    }
    JobCondition failed = JobStatus.condition(job, "Failed");
    if (failed != null) {
      Pod pod = watch.podOf(ns, ref.name());
      return new AttemptState.Exited(
          JobStatus.exitCode(pod),
          JobStatus.failure(job, failed, pod),
          JobStatus.allExited(watch.podsOf(ns, ref.name())));
    }
    if (JobStatus.condition(job, "Complete") != null) {
      return new AttemptState.Exited(
          0,
          "Job " + ns + "/" + ref.name() + " completed",
          JobStatus.allExited(watch.podsOf(ns, ref.name())));
    }
    Pod pod = watch.podOf(ns, ref.name());
    return new AttemptState.Running(
        "Job "
            + ns
            + "/"
            + ref.name()
            + (pod == null
                ? ", no pod yet"
                : ", pod " + pod.getMetadata().getName() + " " + JobStatus.phase(pod)),
        JobStatus.stuck(pod));
  }

  @Override
  public void kill(AttemptRef ref, Duration grace, String reason) {
    String ns = namespaceOf(ref);
    try {
      deleteJob(ns, ref.name(), grace);
      call("delete", () -> client.secrets().inNamespace(ns).withName(ref.name()).delete());
      log.info(
          "Build {} (attempt {}): deleted Job {}/{}: {}.",
          ref.buildId(),
          ref.attempt(),
          ns,
          ref.name(),
          reason);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted");
    }
  }

  /**
   * Every attempt whose Job has not finished, and, once every {@link #SECRET_SWEEP}, every token
   * Secret left without its Job. Finished Jobs stay until their {@code ttlSecondsAfterFinished}, so
   * that {@code kubectl logs} can still read them.
   */
  @Override
  public List<AttemptRef> attempts() {
    // Listed before the Jobs are read: a Secret whose Job is created meanwhile is then seen with
    // it.
    List<Secret> secrets = sweepDue() ? listSecrets() : List.of();
    List<AttemptRef> out = new ArrayList<>();
    Set<String> seen = new HashSet<>();
    for (Job j : watch.jobs()) {
      ClusterWatch.refOf(j)
          .ifPresent(
              r -> {
                seen.add(r.toString());
                if (!JobStatus.finished(j)) {
                  out.add(r);
                }
              });
    }
    for (Secret s : secrets) {
      ClusterWatch.refOf(s).filter(r -> !seen.contains(r.toString())).ifPresent(out::add);
    }
    return out;
  }

  /** Whether the Secrets are to be listed now: on the first pass, then once a sweep interval. */
  private synchronized boolean sweepDue() {
    long now = System.nanoTime();
    if (now - nextSweep < 0) {
      return false;
    }
    nextSweep = now + SECRET_SWEEP.toNanos();
    return true;
  }

  /**
   * oneshot's token Secrets in every namespace the routes use; those it could not list, left out.
   */
  private List<Secret> listSecrets() {
    List<Secret> out = new ArrayList<>();
    for (String ns : watch.namespaces()) {
      try {
        out.addAll(
            call("list", () -> client.secrets().inNamespace(ns).withLabel(JobFactory.BUILD).list())
                .getItems());
      } catch (KubernetesClientException e) {
        log.warn(
            "Cannot list the token Secrets in namespace {}: {}. Will try again in {}.",
            ns,
            e.getMessage(),
            Units.format(SECRET_SWEEP));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return out;
  }

  /**
   * Who hears that the API server refused the dispatcher itself, as a launch found it: its
   * credential (401), or what its Role allows in a namespace (403 that is not a quota); and that a
   * launch in a namespace went through.
   */
  interface Trouble {
    void unauthorized(String why);

    void forbidden(String namespace, String why);

    void allowed(String namespace);

    Trouble NONE =
        new Trouble() {
          @Override
          public void unauthorized(String why) {}

          @Override
          public void forbidden(String namespace, String why) {}

          @Override
          public void allowed(String namespace) {}
        };
  }

  private volatile Trouble trouble = Trouble.NONE;

  void trouble(Trouble trouble) {
    this.trouble = trouble;
  }

  /**
   * What a look at the API server found: null fields where nothing is wrong. {@code unreachable},
   * it did not answer; {@code unauthorized}, it refused the dispatcher's credentials; {@code
   * forbidden}, the namespaces where the dispatcher may not make a build's Job or token Secret, and
   * why; {@code version}, the server's when it answered.
   */
  record Probe(
      String unreachable, String unauthorized, Map<String, String> forbidden, String version) {
    /** What is wrong, said whole; null when nothing. */
    String trouble() {
      if (unreachable != null) {
        return unreachable;
      }
      if (unauthorized != null) {
        return unauthorized;
      }
      if (!forbidden.isEmpty()) {
        return String.join("; ", new TreeSet<>(forbidden.values()));
      }
      return null;
    }
  }

  /** What a launch makes in a namespace: the verb, group and resource a Role must allow. */
  private static final List<String[]> LAUNCH_NEEDS =
      List.of(new String[] {"create", "batch", "jobs"}, new String[] {"create", "", "secrets"});

  /**
   * Looks at the API server as a launch would need it (not rate-limited: a handful of calls):
   * whether it answers ({@code /version}), takes the dispatcher's credentials, and lets it create
   * Jobs and Secrets in each namespace its routes use (a SelfSubjectAccessReview each, which every
   * authenticated user may make: the {@code system:basic-user} ClusterRole). Blocks.
   */
  Probe probe() {
    String version;
    try {
      var v = send("get", client::getKubernetesVersion);
      version = v == null ? null : v.getGitVersion();
    } catch (KubernetesClientException e) {
      if (e.getCode() <= 0) {
        return new Probe(api.describe(ApiErrors.rootMessage(e)), null, Map.of(), null);
      }
      String refused = ApiErrors.credentialRefused(api, e);
      if (refused != null) {
        return new Probe(null, refused, Map.of(), null);
      }
      version = null; // answered with a refusal of its own: reachable
    }
    Map<String, String> forbidden = new java.util.TreeMap<>();
    try {
      for (String ns : watch.namespaces()) {
        for (String[] need : LAUNCH_NEEDS) {
          String denied = denied(ns, need);
          if (denied != null) {
            forbidden.put(ns, denied);
            break;
          }
        }
      }
      // Without it no build pod can prove who it is: each would be launched, wait for its proof
      // until its launch timeout, and spend its attempts.
      String denied = denied(null, PROOF_NEED);
      if (denied != null) {
        for (String ns : watch.namespaces()) {
          forbidden.merge(ns, denied, (a, b) -> a + "; " + b);
        }
      }
    } catch (KubernetesClientException e) {
      String refused = ApiErrors.credentialRefused(api, e);
      if (refused != null) {
        return new Probe(null, refused, Map.of(), version);
      }
      return new Probe(api.describe(ApiErrors.rootMessage(e)), null, Map.of(), version);
    }
    return new Probe(null, null, Map.copyOf(forbidden), version);
  }

  /**
   * What a runner's proof needs, cluster-wide: the TokenReview of its pod's token (the chart's
   * ClusterRole {@code …-runner-review}).
   */
  private static final String[] PROOF_NEED = {"create", "authentication.k8s.io", "tokenreviews"};

  /**
   * Whether the API server lets the dispatcher do {@code need} in {@code ns} (null: cluster-wide),
   * by a SelfSubjectAccessReview: what it says is denied, or null when it allows it, says nothing,
   * or refuses the review itself for a reason of its own (a server without the API: a launch will
   * say what is wrong). Throws when it cannot be reached or does not take the credentials.
   */
  private String denied(String ns, String[] need) {
    var review =
        new io.fabric8.kubernetes.api.model.authorization.v1.SelfSubjectAccessReviewBuilder()
            .withNewSpec()
            .withNewResourceAttributes()
            .withNamespace(ns)
            .withVerb(need[0])
            .withGroup(need[1])
            .withResource(need[2])
            .endResourceAttributes()
            .endSpec()
            .build();
    io.fabric8.kubernetes.api.model.authorization.v1.SelfSubjectAccessReview answer;
    try {
      // Counted as a review, not a create: it writes nothing (a dashboard of the writes to the
      // API server, or a test of a follower's, counts creates).
      answer =
          send(
              "review", () -> client.authorization().v1().selfSubjectAccessReview().create(review));
    } catch (KubernetesClientException e) {
      if (e.getCode() <= 0 || ApiErrors.credentialRefused(api, e) != null) {
        throw e;
      }
      log.debug("SelfSubjectAccessReview in {} refused: {}", ns, ApiErrors.message(e));
      return null;
    }
    var st = answer == null ? null : answer.getStatus();
    // A server that says nothing (no status) is taken at its word that nothing is wrong.
    if (st == null || Boolean.TRUE.equals(st.getAllowed())) {
      return null;
    }
    return ApiErrors.forbidden(
        "the dispatcher may not "
            + need[0]
            + " "
            + need[2]
            + (need[1].isEmpty() ? "" : "." + need[1])
            + (ns == null
                ? " (cluster-wide: each build pod proves who it is with one)"
                : " in namespace " + ns)
            + (st.getReason() == null || st.getReason().isBlank()
                ? ""
                : " (" + st.getReason() + ")"));
  }

  /** The namespaces this launcher's routes use. */
  Set<String> namespaces() {
    return watch.namespaces();
  }

  /** The API server's URL. */
  String apiUrl() {
    return String.valueOf(client.getMasterUrl());
  }

  /** The informers' view of the cluster (for tests in this package). */
  ClusterWatch watch() {
    return watch;
  }

  @Override
  public void close() {
    if (balloons != null) {
      balloons.close();
    }
    watch.close();
    client.close();
  }
}
