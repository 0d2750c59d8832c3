package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.DeletionPropagation;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Secret;
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
import io.vertx.core.Vertx;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
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
  private final DroppedFields dropped = new DroppedFields();
  private final ApiReachability api;
  private volatile AttemptEvents events = AttemptEvents.NONE;

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
      Set<String> namespaces) {
    this.client = client;
    this.factory = factory;
    this.limiter = limiter;
    this.launchesInFlight = launchesInFlight;
    this.api = new ApiReachability(String.valueOf(client.getMasterUrl()));
    this.watch = new ClusterWatch(client, namespaces, api);
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
        new JobFactory(templates, k.namespace(), k.ttlSecondsAfterFinished()),
        new RateLimiter(k.qps(), k.burst()),
        k.launchesInFlight(),
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
  public Optional<Reachability> reachability() {
    return Optional.of(api.state());
  }

  @Override
  public void whenReachable(Runnable listener) {
    api.whenReachable(listener);
  }

  @Override
  public List<String> warnings() {
    return dropped.warnings();
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
    limiter.acquire();
    try {
      T result = request.get();
      events.apiCall(verb, verb.equals("create") ? 201 : 200);
      api.answered();
      return result;
    } catch (KubernetesClientException e) {
      events.apiCall(verb, Math.max(0, e.getCode()));
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
   * Creates the attempt's Secret and Job and makes the Job own the Secret: three requests
   * (docs/performance.md says what each is for).
   */
  @Override
  public LaunchOutcome launch(Attempt a) {
    Job job = factory.job(a);
    Secret secret = factory.secret(a);
    String ns = job.getMetadata().getNamespace();
    String where = ns + "/" + a.name();
    boolean secretMade = false;
    try {
      putSecret(secret);
      secretMade = true;
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
                ClusterWatch.refOf(created)
                    .map(r -> new AttemptRef(r.buildId(), r.attempt(), r.name(), null))
                    .orElse(null))) {
          dropSecret(secret);
          return new LaunchOutcome.Rejected(
              "a Job named " + where + " exists and is not this attempt's; delete it");
        }
        existed = true;
      }
      own(secret, created);
      if (!existed) {
        dropped.check(job, created);
      }
      return existed
          ? new LaunchOutcome.AlreadyLaunched(ns, "Job " + where + " exists")
          : new LaunchOutcome.Launched(ns, "Job " + where + " created");
    } catch (KubernetesClientException e) {
      LaunchOutcome refused = ApiErrors.classify(e, where, api);
      if (secretMade && refused instanceof LaunchOutcome.Rejected) {
        dropSecret(secret);
      }
      return refused;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new LaunchOutcome.RetryLater(Duration.ofSeconds(1), "interrupted");
    }
  }

  /**
   * Deletes the token Secret of a launch refused for good: no Job will own it. One that cannot be
   * deleted now is left to {@link #SECRET_SWEEP}.
   */
  private void dropSecret(Secret secret) {
    String ns = secret.getMetadata().getNamespace();
    String name = secret.getMetadata().getName();
    try {
      call("delete", () -> client.secrets().inNamespace(ns).withName(name).delete());
    } catch (KubernetesClientException e) {
      log.warn(
          "Cannot delete Secret {}/{} of a refused launch: {}. It is removed later.",
          ns,
          name,
          e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
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
      mergePatch(secret, JobFactory.ownerPatch(job));
    } catch (KubernetesClientException e) {
      // The Job runs either way; an unowned Secret is removed with the attempt by the rescuer.
      log.warn(
          "Cannot make Job {} the owner of its Secret: {}.",
          job.getMetadata().getName(),
          e.getMessage());
    }
  }

  @Override
  public boolean keepsEndedAttempts() {
    return true;
  }

  @Override
  public AttemptState inspect(AttemptRef ref) {
    String ns = ref.namespace() != null ? ref.namespace() : watch.firstNamespace();
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
      return new AttemptState.Exited(JobStatus.exitCode(pod), JobStatus.failure(job, failed, pod));
    }
    if (JobStatus.condition(job, "Complete") != null) {
      return new AttemptState.Exited(0, "Job " + ns + "/" + ref.name() + " completed");
    }
    Pod pod = watch.podOf(ns, ref.name());
    return new AttemptState.Running(
        "Job "
            + ns
            + "/"
            + ref.name()
            + (pod == null
                ? ", no pod yet"
                : ", pod " + pod.getMetadata().getName() + " " + JobStatus.phase(pod)));
  }

  @Override
  public void kill(AttemptRef ref, Duration grace, String reason) {
    String ns = ref.namespace() != null ? ref.namespace() : watch.firstNamespace();
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

  /** The informers' view of the cluster (for tests in this package). */
  ClusterWatch watch() {
    return watch;
  }

  @Override
  public void close() {
    watch.close();
    client.close();
  }
}
