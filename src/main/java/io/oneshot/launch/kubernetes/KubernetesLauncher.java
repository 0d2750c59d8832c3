package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.ContainerStatus;
import io.fabric8.kubernetes.api.model.DeletionPropagation;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.Status;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobCondition;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.fabric8.kubernetes.client.vertx.VertxHttpClientFactory;
import io.oneshot.build.Runner;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import io.vertx.core.Vertx;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs each attempt as a Kubernetes Job made from its route's template ({@link JobFactory}), with
 * the attempt's token in a Secret the Job owns. Creation is idempotent by the attempt's
 * deterministic name; the outcome of every API call is classified for the dispatcher (created,
 * already there, refused for good, or to be retried). Jobs, their Pods and Secrets are watched with
 * informers filtered by the {@code oneshot.io/build} label, in every namespace the routes use: what
 * explains a wait or a failure goes into the build's log and timeline, and every change wakes the
 * rescuer. Every call here blocks; the dispatcher makes them from its own threads.
 */
public final class KubernetesLauncher implements Launcher {
  private static final Logger log = LoggerFactory.getLogger(KubernetesLauncher.class);
  private static final long RESYNC_MS = 10 * 60 * 1000;
  private static final Duration SYNC_TIMEOUT = Duration.ofMinutes(2);

  private final KubernetesClient client;
  private final JobFactory factory;
  private final RateLimiter limiter;
  private final Set<String> namespaces;
  private final Map<String, SharedIndexInformer<Job>> jobs = new LinkedHashMap<>();
  private final Map<String, SharedIndexInformer<Pod>> pods = new LinkedHashMap<>();
  private final Map<String, SharedIndexInformer<Secret>> secrets = new LinkedHashMap<>();
  private final PodNotes notes = new PodNotes();
  private final List<String> warnings = new java.util.concurrent.CopyOnWriteArrayList<>();
  private final Set<String> warned = java.util.concurrent.ConcurrentHashMap.newKeySet();
  private volatile String serverVersion = "(version unknown)";
  private volatile AttemptEvents events = AttemptEvents.NONE;
  private final java.util.concurrent.locks.ReentrantLock podEvents =
      new java.util.concurrent.locks.ReentrantLock();
  private final java.util.concurrent.locks.Condition podChanged = podEvents.newCondition();

  KubernetesLauncher(
      KubernetesClient client, JobFactory factory, RateLimiter limiter, Set<String> namespaces) {
    this.client = client;
    this.factory = factory;
    this.limiter = limiter;
    this.namespaces = namespaces;
  }

  /**
   * Loads and checks the routes' templates, then makes the launcher (nothing is called on the API
   * server until {@link #start}).
   */
  public static KubernetesLauncher create(OneshotConfig config, KubernetesClient client) {
    OneshotConfig.Kubernetes k = config.launcher().kubernetes();
    KubernetesSerialization serialization = client.getKubernetesSerialization();
    JobTemplates templates = JobTemplates.load(k.templateDir(), config.routes(), serialization);
    Set<String> namespaces = new TreeSet<>();
    for (OneshotConfig.Route r : config.routes()) {
      namespaces.add(r.namespace() != null ? r.namespace() : k.namespace());
    }
    return new KubernetesLauncher(
        client,
        new JobFactory(templates, serialization, k.namespace(), k.ttlSecondsAfterFinished()),
        new RateLimiter(k.qps(), k.burst()),
        namespaces);
  }

  /**
   * A client as fabric8 finds its configuration (kubeconfig, or the pod's service account), on our
   * Vert.x instance, with fabric8's own retries off: the dispatcher decides what to retry.
   */
  public static KubernetesClient client(Vertx vertx, OneshotConfig config) {
    Config c =
        new ConfigBuilder(Config.autoConfigure(null))
            .withRequestRetryBackoffLimit(0)
            .withRequestTimeout((int) config.launcher().kubernetes().requestTimeout().toMillis())
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
  }

  @Override
  public void start() {
    readServerVersion();
    for (String ns : namespaces) {
      jobs.put(
          ns,
          watch(
              client
                  .batch()
                  .v1()
                  .jobs()
                  .inNamespace(ns)
                  .withLabel(JobFactory.BUILD)
                  .runnableInformer(RESYNC_MS),
              this::onJob));
      pods.put(
          ns,
          watch(
              client.pods().inNamespace(ns).withLabel(JobFactory.BUILD).runnableInformer(RESYNC_MS),
              this::onPod));
      secrets.put(
          ns,
          watch(
              client
                  .secrets()
                  .inNamespace(ns)
                  .withLabel(JobFactory.BUILD)
                  .runnableInformer(RESYNC_MS),
              s -> {}));
    }
    List<SharedIndexInformer<?>> all = new ArrayList<>();
    all.addAll(jobs.values());
    all.addAll(pods.values());
    all.addAll(secrets.values());
    for (SharedIndexInformer<?> inf : all) {
      try {
        inf.start().toCompletableFuture().get(SYNC_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      } catch (Exception e) {
        throw new IllegalStateException(
            "cannot watch "
                + inf.getApiTypeClass().getSimpleName()
                + "s in namespaces "
                + namespaces
                + " on the Kubernetes API server "
                + client.getMasterUrl()
                + ": "
                + rootMessage(e),
            e);
      }
    }
    log.info(
        "Watching oneshot's Jobs, Pods and Secrets in namespaces {} on {}: {} Jobs found.",
        namespaces,
        client.getMasterUrl(),
        jobs.values().stream().mapToInt(i -> i.getStore().list().size()).sum());
  }

  /** The API server's version, for the log and for what it is told when it drops Job fields. */
  private void readServerVersion() {
    try {
      var v = call("get", client::getKubernetesVersion);
      serverVersion = v == null ? serverVersion : v.getGitVersion();
      log.info("Kubernetes API server {} at {}.", serverVersion, client.getMasterUrl());
    } catch (KubernetesClientException e) {
      log.warn(
          "Cannot read the Kubernetes API server's version at {}: {}.",
          client.getMasterUrl(),
          message(e));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public List<String> warnings() {
    return List.copyOf(warnings);
  }

  /**
   * Compares the Job the API server stored with the one sent: a server that does not know a field
   * (too old, or a feature gate off) drops it silently. Each dropped field is said once, as a WARN
   * and in {@code /readyz}. Builds stay safe without them: a second pod of an attempt is refused by
   * the runner binding; they only spare the cluster that second pod.
   */
  private void checkKept(Job sent, Job kept) {
    if (kept == null || kept.getSpec() == null) {
      return;
    }
    List<String> dropped = new ArrayList<>();
    if (sent.getSpec().getPodFailurePolicy() != null
        && kept.getSpec().getPodFailurePolicy() == null) {
      dropped.add("spec.podFailurePolicy");
    }
    if (sent.getSpec().getPodReplacementPolicy() != null
        && kept.getSpec().getPodReplacementPolicy() == null) {
      dropped.add("spec.podReplacementPolicy");
    }
    if (!Integer.valueOf(0).equals(kept.getSpec().getBackoffLimit())) {
      dropped.add("spec.backoffLimit: 0 (kept as " + kept.getSpec().getBackoffLimit() + ")");
    }
    for (String field : dropped) {
      if (warned.add(field)) {
        String w =
            "the Kubernetes API server "
                + serverVersion
                + " did not keep "
                + field
                + " of Job "
                + kept.getMetadata().getNamespace()
                + "/"
                + kept.getMetadata().getName()
                + ": it may start a second pod of an attempt; oneshot refuses that pod's"
                + " runner and deletes it, so builds still run once";
        warnings.add(w);
        log.warn("{}.", w);
      }
    }
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
      p = awaitPod(intruder.pod(), KubernetesLauncher::exited, REMOVAL_WAIT);
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
    Optional<AttemptRef> of = refOf(p);
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

  /** Whether the pod's provisionerd container has stopped (or the pod has ended). */
  private static boolean exited(Pod p) {
    if (p.getStatus() == null) {
      return false;
    }
    if ("Failed".equals(p.getStatus().getPhase()) || "Succeeded".equals(p.getStatus().getPhase())) {
      return true;
    }
    List<ContainerStatus> cs = p.getStatus().getContainerStatuses();
    return cs != null
        && !cs.isEmpty()
        && cs.stream().allMatch(c -> c.getState() != null && c.getState().getTerminated() != null);
  }

  /**
   * The pod of that name as the informers last saw it, once it passes the test or the wait is over
   * (then as it is); null if it was never seen or is gone. Woken by every pod event.
   */
  private Pod awaitPod(String name, java.util.function.Predicate<Pod> until, Duration wait)
      throws InterruptedException {
    long deadline = System.nanoTime() + wait.toNanos();
    boolean seen = false;
    podEvents.lock();
    try {
      while (true) {
        Pod found = null;
        for (SharedIndexInformer<Pod> inf : pods.values()) {
          for (Pod p : inf.getStore().list()) {
            if (p.getMetadata().getName().equals(name)) {
              found = p;
            }
          }
        }
        if (found == null && seen) {
          return null;
        }
        seen |= found != null;
        long left = deadline - System.nanoTime();
        if ((found != null && until.test(found)) || left <= 0) {
          return found;
        }
        podChanged.awaitNanos(left);
      }
    } finally {
      podEvents.unlock();
    }
  }

  private <T extends HasMetadata> SharedIndexInformer<T> watch(
      SharedIndexInformer<T> informer, Consumer<T> onChange) {
    informer.addEventHandler(
        new ResourceEventHandler<T>() {
          @Override
          public void onAdd(T obj) {
            safely(() -> onChange.accept(obj));
          }

          @Override
          public void onUpdate(T oldObj, T newObj) {
            safely(() -> onChange.accept(newObj));
          }

          @Override
          public void onDelete(T obj, boolean deletedFinalStateUnknown) {
            safely(
                () -> {
                  refOf(obj).ifPresent(events::changed);
                  if (obj instanceof Pod pod) {
                    podsChanged();
                    if (!deletedFinalStateUnknown) {
                      refOf(pod)
                          .ifPresent(
                              ref ->
                                  notes
                                      .deleting(ref.name(), pod)
                                      .ifPresent(n -> events.note(ref, n)));
                    }
                  }
                  if (obj instanceof Job) {
                    notes.forget(obj.getMetadata().getName());
                  }
                });
          }
        });
    // An API server that fails a list or a watch (at start too: a 500, a dropped connection) is
    // tried again with fabric8's backoff, rather than leaving the informer, or the dispatcher,
    // dead.
    informer.exceptionHandler(
        (started, e) -> {
          log.warn(
              "Watching {}s failed{}: {}. Will try again.",
              informer.getApiTypeClass().getSimpleName(),
              started ? "" : " before the first list",
              rootMessage(e));
          return true;
        });
    return informer;
  }

  private static void safely(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      log.warn("Handling a Kubernetes event failed: {}. Will keep watching.", e.toString());
    }
  }

  private void onJob(Job job) {
    Optional<AttemptRef> ref = refOf(job);
    if (ref.isEmpty()) {
      return;
    }
    notes.job(job).forEach(n -> events.note(ref.get(), n));
    events.changed(ref.get());
  }

  private void podsChanged() {
    podEvents.lock();
    try {
      podChanged.signalAll();
    } finally {
      podEvents.unlock();
    }
  }

  private void onPod(Pod pod) {
    podsChanged();
    Optional<AttemptRef> ref = refOf(pod);
    if (ref.isEmpty()) {
      return;
    }
    if (notes.firstSeen(pod)) {
      events.runsIn(ref.get(), pod.getMetadata().getName());
    }
    notes.pod(ref.get().name(), pod).forEach(n -> events.note(ref.get(), n));
    events.changed(ref.get());
  }

  /** The attempt an object belongs to, from its labels. */
  static Optional<AttemptRef> refOf(HasMetadata obj) {
    Map<String, String> l = obj.getMetadata().getLabels();
    if (l == null || !l.containsKey(JobFactory.BUILD) || !l.containsKey(JobFactory.ATTEMPT)) {
      return Optional.empty();
    }
    try {
      long build = Long.parseLong(l.get(JobFactory.BUILD));
      int attempt = Integer.parseInt(l.get(JobFactory.ATTEMPT));
      return Optional.of(
          new AttemptRef(
              build, attempt, Attempt.nameOf(build, attempt), obj.getMetadata().getNamespace()));
    } catch (NumberFormatException e) {
      return Optional.empty();
    }
  }

  /** One call to the API server: rate-limited, and counted with the status it got. */
  private <T> T call(String verb, java.util.function.Supplier<T> request)
      throws InterruptedException {
    limiter.acquire();
    try {
      T result = request.get();
      events.apiCall(verb, verb.equals("create") ? 201 : 200);
      return result;
    } catch (KubernetesClientException e) {
      events.apiCall(verb, Math.max(0, e.getCode()));
      throw e;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Launch

  @Override
  public LaunchOutcome launch(Attempt a) {
    Job job = factory.job(a);
    Secret secret = factory.secret(a);
    String ns = job.getMetadata().getNamespace();
    String where = ns + "/" + a.name();
    try {
      putSecret(secret);
      Job created;
      boolean existed = false;
      try {
        created =
            call("create", () -> client.batch().v1().jobs().inNamespace(ns).resource(job).create());
      } catch (KubernetesClientException e) {
        if (e.getCode() != 409) {
          throw e;
        }
        created =
            call("get", () -> client.batch().v1().jobs().inNamespace(ns).withName(a.name()).get());
        if (created == null) {
          return new LaunchOutcome.RetryLater(
              Duration.ofSeconds(1), "Job " + where + " is being deleted; trying again");
        }
        if (!a.ref()
            .equals(
                refOf(created)
                    .map(r -> new AttemptRef(r.buildId(), r.attempt(), r.name(), null))
                    .orElse(null))) {
          return new LaunchOutcome.Rejected(
              "a Job named " + where + " exists and is not this attempt's; delete it");
        }
        existed = true;
      }
      own(secret, created);
      if (!existed) {
        checkKept(job, created);
      }
      return existed
          ? new LaunchOutcome.AlreadyLaunched(ns, "Job " + where + " exists")
          : new LaunchOutcome.Launched(ns, "Job " + where + " created");
    } catch (KubernetesClientException e) {
      return classify(e, where);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new LaunchOutcome.RetryLater(Duration.ofSeconds(1), "interrupted");
    }
  }

  /**
   * Creates the attempt's token Secret, or sets its token when it exists (a launch tried again, or
   * a launch with a renewed token). It exists before the Job, so the pod never waits for it.
   */
  private void putSecret(Secret secret) throws InterruptedException {
    String ns = secret.getMetadata().getNamespace();
    try {
      call("create", () -> client.secrets().inNamespace(ns).resource(secret).create());
    } catch (KubernetesClientException e) {
      if (e.getCode() != 409) {
        throw e;
      }
      mergePatch(secret, Map.of("data", secret.getData()));
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

  /** Makes the Job own its Secret, so that Kubernetes deletes the two together. */
  private void own(Secret secret, Job job) throws InterruptedException {
    String uid = job.getMetadata().getUid();
    if (uid == null) {
      return;
    }
    try {
      mergePatch(
          secret, Map.of("metadata", Map.of("ownerReferences", List.of(JobFactory.ownedBy(job)))));
    } catch (KubernetesClientException e) {
      // The Job runs either way; an unowned Secret is removed with the attempt by the rescuer.
      log.warn(
          "Cannot make Job {} the owner of its Secret: {}.",
          job.getMetadata().getName(),
          e.getMessage());
    }
  }

  /**
   * What a refused call means: 422 (the API server says the Job is invalid) can never succeed; 429
   * waits as long as the server asks; 403 (forbidden, or a quota exceeded), 5xx, timeouts and
   * broken connections are retried with backoff.
   */
  static LaunchOutcome classify(KubernetesClientException e, String where) {
    int code = e.getCode();
    String message = message(e);
    return switch (code) {
      case 422 ->
          new LaunchOutcome.Rejected("the Kubernetes API refused Job " + where + ": " + message);
      case 429 ->
          new LaunchOutcome.RetryLater(
              retryAfter(e), "throttled by the Kubernetes API: " + message);
      case 403 ->
          new LaunchOutcome.RetryLater(
              Duration.ofSeconds(5), "forbidden by the Kubernetes API (quota or RBAC): " + message);
      default ->
          new LaunchOutcome.RetryLater(
              null,
              (code == 0
                      ? "cannot reach the Kubernetes API"
                      : "the Kubernetes API answered " + code)
                  + ": "
                  + message);
    };
  }

  private static Duration retryAfter(KubernetesClientException e) {
    Status s = e.getStatus();
    if (s != null && s.getDetails() != null && s.getDetails().getRetryAfterSeconds() != null) {
      return Duration.ofSeconds(Math.max(1, s.getDetails().getRetryAfterSeconds()));
    }
    return Duration.ofSeconds(1);
  }

  private static String message(KubernetesClientException e) {
    Status s = e.getStatus();
    if (s != null && s.getMessage() != null && !s.getMessage().isBlank()) {
      return s.getMessage();
    }
    return rootMessage(e);
  }

  private static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null && t.getCause() != t) {
      t = t.getCause();
    }
    return t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
  }

  // ---------------------------------------------------------------------------------------------
  // Inspect, kill, list

  @Override
  public boolean keepsEndedAttempts() {
    return true;
  }

  @Override
  public AttemptState inspect(AttemptRef ref) {
    String ns = ref.namespace() != null ? ref.namespace() : firstNamespace();
    Job job = cachedJob(ns, ref.name());
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
    JobCondition failed = condition(job, "Failed");
    if (failed != null) {
      Pod pod = podOf(ns, ref.name());
      return new AttemptState.Exited(exitCode(pod), failure(job, failed, pod));
    }
    if (condition(job, "Complete") != null) {
      return new AttemptState.Exited(0, "Job " + ns + "/" + ref.name() + " completed");
    }
    Pod pod = podOf(ns, ref.name());
    return new AttemptState.Running(
        "Job "
            + ns
            + "/"
            + ref.name()
            + (pod == null
                ? ", no pod yet"
                : ", pod " + pod.getMetadata().getName() + " " + phase(pod)));
  }

  private String firstNamespace() {
    return namespaces.iterator().next();
  }

  private Job cachedJob(String ns, String name) {
    SharedIndexInformer<Job> inf = jobs.get(ns);
    return inf == null ? null : inf.getStore().getByKey(ns + "/" + name);
  }

  private Pod podOf(String ns, String jobName) {
    SharedIndexInformer<Pod> inf = pods.get(ns);
    if (inf == null) {
      return null;
    }
    Pod newest = null;
    for (Pod p : inf.getStore().list()) {
      Map<String, String> l = p.getMetadata().getLabels();
      if (l != null && jobName.equals(l.get("job-name"))
          || l != null && jobName.equals(l.get("batch.kubernetes.io/job-name"))) {
        if (newest == null
            || String.valueOf(p.getMetadata().getCreationTimestamp())
                    .compareTo(String.valueOf(newest.getMetadata().getCreationTimestamp()))
                > 0) {
          newest = p;
        }
      }
    }
    return newest;
  }

  private static JobCondition condition(Job job, String type) {
    if (job.getStatus() == null || job.getStatus().getConditions() == null) {
      return null;
    }
    for (JobCondition c : job.getStatus().getConditions()) {
      if (type.equals(c.getType()) && "True".equals(c.getStatus())) {
        return c;
      }
    }
    return null;
  }

  /**
   * The pod's phase, and for a pending pod what it waits on: "Pending: ImagePullBackOff: Back-off
   * pulling image …", "Pending: Unschedulable: 0/3 nodes are available: …".
   */
  private static String phase(Pod pod) {
    if (pod.getStatus() == null || pod.getStatus().getPhase() == null) {
      return "(no status yet)";
    }
    String phase = pod.getStatus().getPhase();
    if (!"Pending".equals(phase)) {
      return phase;
    }
    ContainerStatus cs = PodNotes.provisionerd(pod);
    if (cs != null && cs.getState() != null && cs.getState().getWaiting() != null) {
      var w = cs.getState().getWaiting();
      return phase + ": " + w.getReason() + (w.getMessage() == null ? "" : ": " + w.getMessage());
    }
    for (var c :
        pod.getStatus().getConditions() == null
            ? List.<io.fabric8.kubernetes.api.model.PodCondition>of()
            : pod.getStatus().getConditions()) {
      if ("PodScheduled".equals(c.getType()) && "False".equals(c.getStatus())) {
        return phase + ": " + c.getReason() + (c.getMessage() == null ? "" : ": " + c.getMessage());
      }
    }
    return phase;
  }

  private static Integer exitCode(Pod pod) {
    ContainerStatus cs = PodNotes.provisionerd(pod);
    if (cs != null && cs.getState() != null && cs.getState().getTerminated() != null) {
      return cs.getState().getTerminated().getExitCode();
    }
    return null;
  }

  /** Why a Job failed, in a sentence: the Job's reason, and the pod's when there is one. */
  private static String failure(Job job, JobCondition failed, Pod pod) {
    StringBuilder b =
        new StringBuilder("Job ")
            .append(job.getMetadata().getNamespace())
            .append('/')
            .append(job.getMetadata().getName())
            .append(" failed: ")
            .append(failed.getReason() == null ? "Failed" : failed.getReason());
    if (failed.getMessage() != null && !failed.getMessage().isBlank()) {
      b.append(": ").append(failed.getMessage());
    }
    String podWhy = PodNotes.whyEnded(pod);
    if (podWhy != null) {
      b.append("; ").append(podWhy);
    }
    return b.toString();
  }

  @Override
  public void kill(AttemptRef ref, Duration grace, String reason) {
    String ns = ref.namespace() != null ? ref.namespace() : firstNamespace();
    try {
      call(
          "delete",
          () ->
              client
                  .batch()
                  .v1()
                  .jobs()
                  .inNamespace(ns)
                  .withName(ref.name())
                  .withPropagationPolicy(DeletionPropagation.BACKGROUND)
                  .withGracePeriod(grace.toSeconds())
                  .delete());
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
   * Every attempt whose Job has not finished, and every token Secret left without its Job. Finished
   * Jobs stay until their {@code ttlSecondsAfterFinished}, so that {@code kubectl logs} can still
   * read them.
   */
  @Override
  public List<AttemptRef> attempts() {
    List<AttemptRef> out = new ArrayList<>();
    Set<String> seen = new HashSet<>();
    for (SharedIndexInformer<Job> inf : jobs.values()) {
      for (Job j : inf.getStore().list()) {
        refOf(j)
            .ifPresent(
                r -> {
                  seen.add(r.toString());
                  if (condition(j, "Complete") == null && condition(j, "Failed") == null) {
                    out.add(r);
                  }
                });
      }
    }
    for (SharedIndexInformer<Secret> inf : secrets.values()) {
      for (Secret s : inf.getStore().list()) {
        refOf(s).filter(r -> !seen.contains(r.toString())).ifPresent(out::add);
      }
    }
    return out;
  }

  @Override
  public void close() {
    List<SharedIndexInformer<?>> all = new ArrayList<>();
    all.addAll(jobs.values());
    all.addAll(pods.values());
    all.addAll(secrets.values());
    all.forEach(SharedIndexInformer::stop);
    client.close();
  }
}
