package io.oneshot.testing.k8s;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerStateBuilder;
import io.fabric8.kubernetes.api.model.ContainerStatusBuilder;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.OwnerReferenceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.PodConditionBuilder;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobConditionBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.JobStatus;
import io.fabric8.kubernetes.api.model.batch.v1.JobStatusBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.PodFailurePolicyOnExitCodesRequirement;
import io.fabric8.kubernetes.api.model.batch.v1.PodFailurePolicyOnPodConditionsPattern;
import io.fabric8.kubernetes.api.model.batch.v1.PodFailurePolicyRule;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.Watch;
import io.fabric8.kubernetes.client.Watcher;
import io.fabric8.kubernetes.client.WatcherException;
import io.oneshot.launch.local.SharedArchive;
import io.oneshot.testing.ChildJvm;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The Job controller and the kubelet, for tests, on fabric8's mock API server (which has no
 * controllers). Each Job created gets a pod; its container runs as a local process with the
 * container's environment (Secret-backed and downward-API variables resolved), and pod and Job
 * status are written as the real controllers would, from the Job's own spec:
 *
 * <ul>
 *   <li>a failed pod is matched against {@code podFailurePolicy} (exit codes, pod conditions; rules
 *       in order, {@code FailJob}, {@code Ignore}, {@code Count}); a counted failure beyond {@code
 *       backoffLimit} (default 6) fails the Job with {@code BackoffLimitExceeded}, else a new pod
 *       replaces it;
 *   <li>{@code activeDeadlineSeconds} fails the Job with {@code DeadlineExceeded} and stops its
 *       pods; a failed Job's running pods are deleted;
 *   <li>a deleted Job takes its pods with it unless deleted with {@code Orphan} propagation (the
 *       API's default for batch/v1 Jobs); a deleted pod's process gets SIGTERM, then SIGKILL (with
 *       everything it started) after the deletion's grace period, else the pod's {@code
 *       terminationGracePeriodSeconds};
 *   <li>the container runs its {@code command} (else the image's entrypoint) with its {@code args}
 *       (else the image's default arguments, when no command is given); {@code oneshot} is the test
 *       class path's {@code io.oneshot.cli.Main}. Only the oneshot image is known: another image,
 *       or one marked {@link #unpullable}, stays {@code ErrImagePull}, then {@code
 *       ImagePullBackOff}.
 * </ul>
 *
 * <p>A running pod that is deleted is replaced at once, while it terminates (and its end is not
 * counted), when the Job's {@code podReplacementPolicy} is {@code TerminatingOrFailed} (its default
 * without a {@code podFailurePolicy}), or always with {@link #replaceDeletedPods}: a controller
 * without pod tracking or the field (before 1.26, or with the fields dropped). With {@code Failed}
 * the replacement waits for the pod to end.
 *
 * <p>Its limits: one pod at a time per Job (parallelism 1), no real scheduling, resources or
 * restarts; a volume mount is a directory of the pod, seen through variables and the working
 * directory that name a path under it; status is written with plain updates (the mock lets them
 * overwrite status).
 */
public final class FakeKubelet implements AutoCloseable {
  /** The image oneshot's templates use, by repository: what its Dockerfile sets. */
  private static final String ONESHOT_REPOSITORY = "ghcr.io/oneshot-dev/oneshot";

  private static final List<String> ONESHOT_ENTRYPOINT = List.of("/usr/local/bin/oneshot");
  private static final List<String> ONESHOT_CMD =
      List.of("dispatcher", "--config", "/etc/oneshot/config/oneshot.yaml");
  private static final Map<String, String> ONESHOT_ENV =
      Map.of(
          "TF_IN_AUTOMATION", "1",
          "CHECKPOINT_DISABLE", "1",
          "ONESHOT_WORK_DIR", "/work",
          "HOME", "/work");
  private static final String ONESHOT_WORKDIR = "/work";

  private final KubernetesClient api;
  private final FaultyDispatcher requests;
  private final List<String> namespaces;
  private final Path workRoot;
  private final Path bin;

  /**
   * The image's oneshot command, and where in it each pod's process gets its class data sharing
   * archive flags ({@link ChildJvm#sharedArchive}: each writes a copy of its own until one is in
   * place, and maps only a finished one).
   */
  private final SharedArchive.Command oneshot;

  private final Map<String, JobRun> jobs = new ConcurrentHashMap<>();
  private final Map<String, PodRun> pods = new ConcurrentHashMap<>();
  private final Set<String> held = ConcurrentHashMap.newKeySet();
  private final Set<String> unpullable = ConcurrentHashMap.newKeySet();
  private final List<Watch> watches = new ArrayList<>();
  private final ExecutorService work = Executors.newVirtualThreadPerTaskExecutor();

  /** How long the kubelet waits to sync a pod again after its sync failed. */
  static final java.time.Duration SYNC_BACKOFF = java.time.Duration.ofSeconds(10);

  /**
   * How many times a container could not be configured (its Secret or key missing) and waited for
   * the kubelet's next sync.
   */
  public final java.util.concurrent.atomic.AtomicInteger configErrors =
      new java.util.concurrent.atomic.AtomicInteger();

  private final ScheduledExecutorService timers =
      Executors.newSingleThreadScheduledExecutor(
          Thread.ofPlatform().name("fake-job-controller").daemon().factory());
  private volatile Consumer<String> beforeStart = name -> {};
  private volatile Consumer<String> beforeStop = pod -> {};
  private volatile boolean replaceDeletedPods;

  /** Every Job this controller saw created, by namespace/name, in order. */
  public final List<String> jobsSeen = new CopyOnWriteArrayList<>();

  /** A Job and what its controller keeps about it. Guarded by itself. */
  private static final class JobRun {
    final Job job;
    final String ns;
    final String name;
    final List<PodRun> pods = new ArrayList<>();
    int failed;
    boolean finished;
    volatile boolean deleted;

    JobRun(Job job) {
      this.job = job;
      this.ns = job.getMetadata().getNamespace();
      this.name = job.getMetadata().getName();
    }
  }

  /** One pod and its container's process. */
  private static final class PodRun {
    final JobRun job;
    final String name;
    final Path dir;
    final long created = System.nanoTime();
    volatile Process process;

    /** Gone from the API; its process, if any, is being stopped. */
    volatile boolean deleted;

    /** Its end is none of the controller's business (already replaced, or already decided). */
    volatile boolean settled;

    /** Why the kubelet ended the container, when it did: "OOMKilled", "Evicted". */
    volatile String killedFor;

    PodRun(JobRun job, String name, Path dir) {
      this.job = job;
      this.name = name;
      this.dir = dir;
    }
  }

  /**
   * The API server's ServiceAccount tokens, which the kubelet asks for a pod's projected ones; null
   * on a real API server, which issues them itself ({@link #onRealApi}).
   */
  private final ServiceAccountTokens tokens;

  /**
   * The Job controller and the kubelet for a real API server that runs neither (the second control
   * plane of {@code scripts/kube second}: etcd, kube-apiserver, and kube-controller-manager with
   * its ServiceAccount, token and garbage collector controllers only). What differs from the mock:
   * a pod's projected token comes from the API server's TokenRequest ({@code POST
   * serviceaccounts/<name>/token} bound to the pod, as pkg/kubelet/token/token_manager.go asks for
   * it), status is written through the {@code status} subresource (the API server ignores status on
   * a plain update), a deleted Job's pods are the garbage collector's to delete, and a pod no node
   * holds is deleted at once (kube-apiserver v1.20.2 pkg/registry/core/pod/strategy.go, {@code
   * CheckGracefulDelete}: an unscheduled pod gets a grace of 0), so its process gets its template's
   * grace.
   */
  public static FakeKubelet onRealApi(KubernetesClient admin, List<String> namespaces, Path work) {
    FakeKubelet k = new FakeKubelet(admin, null, namespaces, work, null);
    k.start();
    return k;
  }

  FakeKubelet(
      KubernetesClient api,
      FaultyDispatcher requests,
      List<String> namespaces,
      Path workRoot,
      ServiceAccountTokens tokens) {
    this.tokens = tokens;
    this.api = api;
    this.requests = requests;
    this.namespaces = List.copyOf(namespaces);
    this.workRoot = workRoot;
    List<String> cmd =
        new ArrayList<>(
            List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED",
                "-Dio.netty.noUnsafe=true",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xshare:auto"));
    int archiveAt = cmd.size();
    cmd.addAll(
        List.of(
            "-cp", String.join(File.pathSeparator, ChildJvm.classPath()), "io.oneshot.cli.Main"));
    this.oneshot =
        new SharedArchive.Command(List.copyOf(cmd), archiveAt, ChildJvm.sharedArchive("pod"));
    try {
      this.bin = Files.createDirectories(workRoot.resolve("bin"));
      ChildJvm.execScript(bin.resolve("oneshot"), oneshot.command());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  void start() {
    if (tokens == null) {
      // As the real controllers watch: informers, which list again after their API server was
      // away and tell of what changed meanwhile.
      for (String ns : namespaces) {
        informers.add(
            api.batch()
                .v1()
                .jobs()
                .inNamespace(ns)
                .inform(
                    new io.fabric8.kubernetes.client.informers.ResourceEventHandler<Job>() {
                      @Override
                      public void onAdd(Job job) {
                        work.execute(() -> begin(job));
                      }

                      @Override
                      public void onUpdate(Job before, Job job) {}

                      @Override
                      public void onDelete(Job job, boolean unknown) {
                        work.execute(() -> jobDeleted(job));
                      }
                    }));
        informers.add(
            api.pods()
                .inNamespace(ns)
                .inform(
                    new io.fabric8.kubernetes.client.informers.ResourceEventHandler<Pod>() {
                      @Override
                      public void onAdd(Pod pod) {}

                      @Override
                      public void onUpdate(Pod before, Pod pod) {}

                      @Override
                      public void onDelete(Pod pod, boolean unknown) {
                        work.execute(() -> podDeleted(pod));
                      }
                    }));
      }
      return;
    }
    for (String ns : namespaces) {
      watches.add(
          api.batch()
              .v1()
              .jobs()
              .inNamespace(ns)
              .watch(
                  new Watcher<Job>() {
                    @Override
                    public void eventReceived(Action action, Job job) {
                      if (action == Action.ADDED) {
                        work.execute(() -> begin(job));
                      } else if (action == Action.DELETED) {
                        work.execute(() -> jobDeleted(job));
                      }
                    }

                    @Override
                    public void onClose(WatcherException cause) {}
                  }));
      watches.add(
          api.pods()
              .inNamespace(ns)
              .watch(
                  new Watcher<Pod>() {
                    @Override
                    public void eventReceived(Action action, Pod pod) {
                      if (action == Action.DELETED) {
                        work.execute(() -> podDeleted(pod));
                      }
                    }

                    @Override
                    public void onClose(WatcherException cause) {}
                  }));
    }
  }

  private static String key(String ns, String name) {
    return ns + "/" + name;
  }

  // ---------------------------------------------------------------------------------------------
  // What tests can do

  /**
   * Called with the Job's name after its pod is reported running and before its process starts, on
   * the kubelet's thread: a test can wait there for what should be seen before provisionerd runs.
   */
  public void beforeStart(Consumer<String> hook) {
    this.beforeStart = hook;
  }

  /**
   * Called with a deleted pod's name before its process gets SIGTERM, on the kubelet's thread: a
   * test can hold the signal back (as a slow or unreachable node does) until it has seen what
   * should happen meanwhile.
   */
  public void beforeStop(Consumer<String> hook) {
    this.beforeStop = hook;
  }

  /**
   * From now on, a running pod that is deleted is replaced at once by a new pod of its Job, while
   * it terminates, and its end is not counted.
   */
  public void replaceDeletedPods() {
    replaceDeletedPods = true;
  }

  /** From now on, pods with this image cannot pull it. */
  public void unpullable(String image) {
    unpullable.add(image);
  }

  /** Keeps the pods of Jobs with this name pending ("Unschedulable") until {@link #release}. */
  public void hold(String jobName) {
    held.add(jobName);
  }

  public void release(String ns, String jobName) {
    held.remove(jobName);
    latest(ns, jobName)
        .filter(p -> p.process == null && !p.deleted)
        .ifPresent(p -> work.execute(() -> schedule(p)));
  }

  /** The names of every pod made for the Job, in order. */
  public List<String> podsOf(String ns, String jobName) {
    return pods.values().stream()
        .filter(p -> p.job.ns.equals(ns) && p.job.name.equals(jobName))
        .sorted(java.util.Comparator.comparingLong(p -> p.created))
        .map(p -> p.name)
        .toList();
  }

  /**
   * The node runs out of memory and the kubelet evicts this Job's pod: its container is killed, the
   * pod fails with reason Evicted and a DisruptionTarget condition.
   */
  public void evict(String ns, String jobName) {
    PodRun p = latest(ns, jobName).orElseThrow();
    p.killedFor = "Evicted";
    updatePod(
        p,
        pod -> {
          List<PodCondition> cs = new ArrayList<>(pod.getStatus().getConditions());
          cs.add(
              condition(
                  "DisruptionTarget",
                  "True",
                  "TerminationByKubelet",
                  "The node was low on resource: memory."));
          pod.getStatus().setConditions(cs);
        });
    if (p.process == null) {
      ended(p, 137);
    } else {
      killTree(p);
    }
  }

  /** The container of this Job's pod is killed for memory. */
  public void oomKill(String ns, String jobName) {
    PodRun p = latest(ns, jobName).orElseThrow();
    p.killedFor = "OOMKilled";
    killTree(p);
  }

  /** What the Job's latest pod wrote to stdout: what {@code kubectl logs} shows. */
  public String podLog(String ns, String jobName) {
    try {
      Optional<PodRun> p = latest(ns, jobName);
      return p.isEmpty() ? "" : Files.readString(p.get().dir.resolve("stdout.log"));
    } catch (IOException e) {
      return "";
    }
  }

  /** Whether any pod of this Job has its process running. */
  public boolean running(String ns, String jobName) {
    return pods.values().stream()
        .anyMatch(
            p ->
                p.job.ns.equals(ns)
                    && p.job.name.equals(jobName)
                    && p.process != null
                    && p.process.isAlive());
  }

  private Optional<PodRun> latest(String ns, String jobName) {
    return pods.values().stream()
        .filter(p -> p.job.ns.equals(ns) && p.job.name.equals(jobName))
        .max(java.util.Comparator.comparingLong(p -> p.created));
  }

  // ---------------------------------------------------------------------------------------------
  // The Job controller

  private void begin(Job job) {
    JobRun j = new JobRun(job);
    if (jobs.putIfAbsent(key(j.ns, j.name), j) != null) {
      return;
    }
    jobsSeen.add(key(j.ns, j.name));
    updateJob(j, s -> s.withStartTime(Instant.now().toString()).withActive(0));
    Long deadline = job.getSpec().getActiveDeadlineSeconds();
    if (deadline != null) {
      timers.schedule(() -> work.execute(() -> pastDeadline(j)), deadline, TimeUnit.SECONDS);
    }
    newPod(j);
  }

  private void pastDeadline(JobRun j) {
    synchronized (j) {
      if (j.finished || j.deleted) {
        return;
      }
      fail(j, "DeadlineExceeded", "Job was active longer than specified deadline");
    }
  }

  /** The Job is finished as failed: the condition is written and its running pods are deleted. */
  private void fail(JobRun j, String reason, String message) {
    j.finished = true;
    String now = Instant.now().toString();
    updateJob(
        j,
        s ->
            s.withActive(0)
                .withFailed(j.failed)
                .withConditions(
                    new JobConditionBuilder()
                        .withType("Failed")
                        .withStatus("True")
                        .withReason(reason)
                        .withMessage(message)
                        .withLastTransitionTime(now)
                        .build()));
    for (PodRun p : j.pods) {
      p.settled = true;
      if (!p.deleted && (p.process == null || p.process.isAlive())) {
        api.pods().inNamespace(j.ns).withName(p.name).delete();
      }
    }
  }

  private void complete(JobRun j) {
    j.finished = true;
    String now = Instant.now().toString();
    updateJob(
        j,
        s ->
            s.withActive(0)
                .withSucceeded(1)
                .withCompletionTime(now)
                .withConditions(
                    new JobConditionBuilder()
                        .withType("Complete")
                        .withStatus("True")
                        .withLastTransitionTime(now)
                        .build()));
  }

  /** A pod of the Job ended: the Job completes, fails or gets a new pod, by its spec. */
  private void podEnded(PodRun p, int code, List<PodCondition> conditions) {
    JobRun j = p.job;
    synchronized (j) {
      if (p.settled || j.finished || j.deleted) {
        return;
      }
      p.settled = true;
      if (code == 0) {
        complete(j);
        return;
      }
      String action = "Count";
      String message = null;
      var policy = j.job.getSpec().getPodFailurePolicy();
      List<PodFailurePolicyRule> rules = policy == null ? List.of() : policy.getRules();
      for (int i = 0; i < rules.size(); i++) {
        Optional<String> matched = matches(rules.get(i), p, code, conditions);
        if (matched.isPresent()) {
          action = rules.get(i).getAction();
          message = matched.get() + " matching " + action + " rule at index " + i;
          break;
        }
      }
      switch (action) {
        case "FailJob" -> fail(j, "PodFailurePolicy", message);
        case "Ignore" -> newPod(j);
        default -> {
          j.failed++;
          Integer limit = j.job.getSpec().getBackoffLimit();
          if (j.failed > (limit == null ? 6 : limit)) {
            fail(j, "BackoffLimitExceeded", "Job has reached the specified backoff limit");
          } else {
            updateJob(j, s -> s.withFailed(j.failed));
            newPod(j);
          }
        }
      }
    }
  }

  /**
   * How the pod matches the rule ("Container c for pod ns/p failed with exit code 3"), if it does.
   */
  private static Optional<String> matches(
      PodFailurePolicyRule rule, PodRun p, int code, List<PodCondition> conditions) {
    PodFailurePolicyOnExitCodesRequirement codes = rule.getOnExitCodes();
    if (codes != null && code != 0) {
      String container = codes.getContainerName();
      boolean in = codes.getValues().contains(code);
      if ((container == null || container.equals("provisionerd"))
          && ("In".equals(codes.getOperator()) ? in : !in)) {
        return Optional.of(
            "Container provisionerd for pod "
                + p.job.ns
                + "/"
                + p.name
                + " failed with exit code "
                + code);
      }
    }
    for (PodFailurePolicyOnPodConditionsPattern want :
        rule.getOnPodConditions() == null
            ? List.<PodFailurePolicyOnPodConditionsPattern>of()
            : rule.getOnPodConditions()) {
      for (PodCondition c : conditions) {
        if (c.getType().equals(want.getType())
            && c.getStatus().equals(want.getStatus() == null ? "True" : want.getStatus())) {
          return Optional.of("Pod " + p.job.ns + "/" + p.name + " has condition " + c.getType());
        }
      }
    }
    return Optional.empty();
  }

  /** The Job is gone: its pods go too, unless it was deleted with Orphan propagation. */
  private void jobDeleted(Job job) {
    JobRun j = jobs.get(key(job.getMetadata().getNamespace(), job.getMetadata().getName()));
    if (j == null) {
      return;
    }
    List<PodRun> mine;
    synchronized (j) {
      j.deleted = true;
      mine = List.copyOf(j.pods);
    }
    if (requests == null) {
      return; // a real garbage collector deletes or orphans the Job's pods
    }
    String policy =
        requests
            .lastDeleteOptions("/apis/batch/v1/namespaces/" + j.ns + "/jobs/" + j.name)
            .map(o -> o.path("propagationPolicy").asText(""))
            .orElse("");
    for (PodRun p : mine) {
      if (policy.isEmpty() || policy.equals("Orphan")) {
        updatePod(p, pod -> pod.getMetadata().setOwnerReferences(List.of()));
      } else {
        api.pods().inNamespace(j.ns).withName(p.name).delete();
      }
    }
  }

  /** Makes a pod for the Job and starts it, unless it is held or its image cannot be pulled. */
  private void newPod(JobRun j) {
    String podName =
        j.name
            + "-"
            + Long.toString(ThreadLocalRandom.current().nextLong(36 * 36 * 36 * 36 * 36), 36);
    Path dir;
    try {
      dir = Files.createDirectories(workRoot.resolve(podName));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    PodRun p = new PodRun(j, podName, dir);
    synchronized (j) {
      j.pods.add(p);
    }
    pods.put(key(j.ns, podName), p);
    Map<String, String> labels = new LinkedHashMap<>();
    Map<String, String> fromTemplate = j.job.getSpec().getTemplate().getMetadata().getLabels();
    if (fromTemplate != null) {
      labels.putAll(fromTemplate);
    }
    labels.put("job-name", j.name);
    labels.put("batch.kubernetes.io/job-name", j.name);
    labels.put("controller-uid", j.job.getMetadata().getUid());
    Pod pod =
        new PodBuilder()
            .withNewMetadata()
            .withName(podName)
            .withNamespace(j.ns)
            .withLabels(labels)
            .withOwnerReferences(
                new OwnerReferenceBuilder()
                    .withApiVersion("batch/v1")
                    .withKind("Job")
                    .withName(j.name)
                    .withUid(j.job.getMetadata().getUid())
                    .withController(true)
                    .build())
            .endMetadata()
            .withSpec(j.job.getSpec().getTemplate().getSpec())
            .withNewStatus()
            .withPhase("Pending")
            .endStatus()
            .build();
    createPod(j.ns, pod);
    if (j.deleted) {
      // The Job went while its pod was being made: the garbage collector takes the pod too.
      api.pods().inNamespace(j.ns).withName(podName).delete();
      return;
    }
    updateJob(j, s -> s.withActive(1));
    work.execute(() -> schedule(p));
  }

  // ---------------------------------------------------------------------------------------------
  // The scheduler and the kubelet

  private void schedule(PodRun p) {
    if (held.contains(p.job.name)) {
      updatePod(
          p,
          pod ->
              pod.getStatus()
                  .setConditions(
                      List.of(
                          condition(
                              "PodScheduled",
                              "False",
                              "Unschedulable",
                              "0/3 nodes are available: 3 Insufficient memory."))));
      return;
    }
    updatePod(
        p,
        pod -> {
          pod.getSpec().setNodeName("fake-node-1");
          pod.getStatus().setConditions(List.of(condition("PodScheduled", "True", null, null)));
        });
    Container c = container(p);
    String image = c.getImage() == null ? "" : c.getImage();
    // On a real API server, the real node's templates name the image imported there (the same
    // oneshot, RealCluster.image()).
    boolean known =
        image.startsWith(ONESHOT_REPOSITORY + ":")
            || (tokens == null && image.startsWith(RealCluster.IMAGE + ":"));
    if (!known || unpullable.contains(image)) {
      String why = "failed to pull and unpack image \"" + image + "\": not found";
      waiting(p, "ErrImagePull", why);
      timers.schedule(
          () ->
              work.execute(
                  () -> {
                    if (!p.deleted && p.process == null) {
                      waiting(p, "ImagePullBackOff", "Back-off pulling image \"" + image + "\"");
                    }
                  }),
          1,
          TimeUnit.SECONDS);
      return;
    }
    run(p, c);
  }

  /** Where the container mounts the volume of that name; null when it does not. */
  private static String mountPathOf(Container c, String volume) {
    if (c.getVolumeMounts() == null) {
      return null;
    }
    return c.getVolumeMounts().stream()
        .filter(m -> m.getName().equals(volume))
        .map(VolumeMount::getMountPath)
        .findFirst()
        .orElse(null);
  }

  private static Container container(PodRun p) {
    return p.job.job.getSpec().getTemplate().getSpec().getContainers().stream()
        .filter(x -> x.getName().equals("provisionerd"))
        .findFirst()
        .orElseThrow();
  }

  private void run(PodRun p, Container c) {
    // The image's entrypoint and default arguments, unless the container says otherwise.
    List<String> cmd = new ArrayList<>();
    boolean ownCommand = c.getCommand() != null && !c.getCommand().isEmpty();
    cmd.addAll(ownCommand ? c.getCommand() : ONESHOT_ENTRYPOINT);
    cmd.addAll(
        c.getArgs() != null && !c.getArgs().isEmpty()
            ? c.getArgs()
            : ownCommand ? List.of() : ONESHOT_CMD);
    if (cmd.get(0).equals("oneshot") || cmd.get(0).equals(ONESHOT_ENTRYPOINT.get(0))) {
      cmd.set(0, bin.resolve("oneshot").toString());
    }
    Map<String, String> env = new LinkedHashMap<>(ONESHOT_ENV);
    env.put("LANG", "C.UTF-8");
    env.put("HOSTNAME", p.name);
    Pod self = api.pods().inNamespace(p.job.ns).withName(p.name).get();
    for (EnvVar e : c.getEnv() == null ? List.<EnvVar>of() : c.getEnv()) {
      if (e.getValue() != null) {
        env.put(e.getName(), e.getValue());
      } else if (e.getValueFrom() != null && e.getValueFrom().getFieldRef() != null) {
        String path = e.getValueFrom().getFieldRef().getFieldPath();
        String v =
            switch (path) {
              case "metadata.name" -> p.name;
              case "metadata.uid" -> self == null ? null : self.getMetadata().getUid();
              case "metadata.namespace" -> p.job.ns;
              default -> throw new IllegalStateException("fake kubelet: no fieldRef " + path);
            };
        if (v != null) {
          env.put(e.getName(), v);
        }
      } else if (e.getValueFrom() != null && e.getValueFrom().getSecretKeyRef() != null) {
        var ref = e.getValueFrom().getSecretKeyRef();
        Secret s = api.secrets().inNamespace(p.job.ns).withName(ref.getName()).get();
        if (s == null || s.getData() == null || !s.getData().containsKey(ref.getKey())) {
          waiting(
              p,
              "CreateContainerConfigError",
              s == null
                  ? "secret \"" + ref.getName() + "\" not found"
                  : "couldn't find key " + ref.getKey() + " in Secret " + ref.getName());
          // The kubelet syncs a pod whose sync failed again after its backOffPeriod
          // (pkg/kubelet/kubelet.go: backOffPeriod = 10 s).
          configErrors.incrementAndGet();
          timers.schedule(
              () ->
                  work.execute(
                      () -> {
                        if (!p.deleted && p.process == null) {
                          run(p, c);
                        }
                      }),
              SYNC_BACKOFF.toMillis(),
              TimeUnit.MILLISECONDS);
          return;
        }
        env.put(
            e.getName(),
            new String(
                Base64.getDecoder().decode(s.getData().get(ref.getKey())), StandardCharsets.UTF_8));
      }
    }
    // Mounts, and the image's working directory, are directories of the pod: a variable or the
    // working directory naming a path under one is moved there.
    Map<String, Path> mounts = new LinkedHashMap<>();
    for (VolumeMount m :
        c.getVolumeMounts() == null ? List.<VolumeMount>of() : c.getVolumeMounts()) {
      mounts.put(m.getMountPath(), p.dir.resolve("volumes").resolve(m.getName()));
    }
    mounts.putIfAbsent(ONESHOT_WORKDIR, p.dir.resolve("work"));
    for (Path local : mounts.values()) {
      try {
        Files.createDirectories(local);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    // A projected serviceAccountToken source: the kubelet asks the API server for a token of the
    // pod's service account, bound to the pod (pkg/kubelet/token/token_manager.go; the volume's
    // files from pkg/volume/projected/projected.go, collectData).
    List<Volume> volumes = self == null ? List.of() : self.getSpec().getVolumes();
    for (Volume v : volumes == null ? List.<Volume>of() : volumes) {
      if (v.getProjected() == null || !mounts.containsKey(mountPathOf(c, v.getName()))) {
        continue;
      }
      for (var source : v.getProjected().getSources()) {
        var sat = source.getServiceAccountToken();
        if (sat != null) {
          long ttl = sat.getExpirationSeconds() == null ? 3600 : sat.getExpirationSeconds();
          try {
            Files.writeString(
                mounts.get(mountPathOf(c, v.getName())).resolve(sat.getPath()),
                tokens != null
                    ? tokens.issue(self, sat.getAudience(), ttl)
                    : tokenRequest(self, sat.getAudience(), ttl),
                StandardCharsets.UTF_8);
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }
      }
    }
    env.replaceAll((k, v) -> moved(v, mounts));
    // The node's tools, and oneshot as the image has it.
    env.put("PATH", bin + ":" + System.getenv().getOrDefault("PATH", "/usr/bin:/bin"));
    String workingDir =
        moved(c.getWorkingDir() == null ? ONESHOT_WORKDIR : c.getWorkingDir(), mounts);
    ProcessBuilder pb = new ProcessBuilder(cmd).directory(Path.of(workingDir).toFile());
    pb.environment().clear();
    pb.environment().putAll(env);
    pb.redirectOutput(p.dir.resolve("stdout.log").toFile());
    pb.redirectError(p.dir.resolve("stderr.log").toFile());
    updatePod(
        p,
        pod -> {
          pod.getStatus().setPhase("Running");
          pod.getStatus()
              .setContainerStatuses(
                  List.of(
                      new ContainerStatusBuilder()
                          .withName("provisionerd")
                          .withImage(c.getImage())
                          .withReady(true)
                          .withState(
                              new ContainerStateBuilder()
                                  .withNewRunning()
                                  .withStartedAt(Instant.now().toString())
                                  .endRunning()
                                  .build())
                          .build()));
        });
    beforeStart.accept(p.job.name);
    if (p.deleted) {
      return;
    }
    try {
      if (pb.command().get(0).equals(bin.resolve("oneshot").toString())) {
        SharedArchive.Use use = oneshot.next();
        Path script = ChildJvm.execScript(p.dir.resolve("oneshot"), oneshot.with(use));
        pb.command().set(0, script.toString());
        p.process = pb.start();
        oneshot.archive().watch(use, p.process);
      } else {
        p.process = pb.start();
      }
    } catch (IOException e) {
      waiting(p, "RunContainerError", e.getMessage());
      return;
    }
    p.process.onExit().thenRun(() -> work.execute(() -> ended(p, p.process.exitValue())));
  }

  /** A container path as the pod's directory holds it: under the longest mount that has it. */
  private static String moved(String v, Map<String, Path> mounts) {
    String best = null;
    for (String m : mounts.keySet()) {
      if ((v.equals(m) || v.startsWith(m + "/")) && (best == null || m.length() > best.length())) {
        best = m;
      }
    }
    return best == null ? v : mounts.get(best) + v.substring(best.length());
  }

  /** The container ended: the pod's status, then the Job controller's turn. */
  private void ended(PodRun p, int code) {
    if (code != 0 && p.killedFor == null && !p.deleted) {
      showWhyItFailed(p, code);
    }
    String reason =
        p.killedFor != null && p.killedFor.equals("OOMKilled")
            ? "OOMKilled"
            : code == 0 ? "Completed" : "Error";
    Pod after =
        updatePod(
            p,
            pod -> {
              pod.getStatus().setPhase(code == 0 ? "Succeeded" : "Failed");
              if ("Evicted".equals(p.killedFor)) {
                pod.getStatus().setReason("Evicted");
                pod.getStatus().setMessage("The node was low on resource: memory.");
              }
              pod.getStatus()
                  .setContainerStatuses(
                      List.of(
                          new ContainerStatusBuilder()
                              .withName("provisionerd")
                              .withState(
                                  new ContainerStateBuilder()
                                      .withNewTerminated()
                                      .withExitCode(code)
                                      .withReason(reason)
                                      .withFinishedAt(Instant.now().toString())
                                      .endTerminated()
                                      .build())
                              .build()));
            });
    podEnded(p, code, after == null ? List.of() : after.getStatus().getConditions());
  }

  private static void showWhyItFailed(PodRun p, int code) {
    try {
      String out = Files.readString(p.dir.resolve("stdout.log"));
      System.err.println(
          "fake kubelet: "
              + p.name
              + " exited with "
              + code
              + "; its stderr:\n"
              + Files.readString(p.dir.resolve("stderr.log"))
              + "\nits stdout ends: "
              + (out.length() > 600 ? out.substring(out.length() - 600) : out));
    } catch (IOException e) {
      // nothing to show
    }
  }

  /**
   * A pod is gone from the API: its process gets SIGTERM, and SIGKILL after the grace period the
   * deletion asked for, else the pod's. A running pod is replaced first when the controller
   * replaces terminating pods ({@link #replacesTerminating}).
   */
  private void podDeleted(Pod pod) {
    PodRun p = pods.get(key(pod.getMetadata().getNamespace(), pod.getMetadata().getName()));
    if (p == null || p.deleted) {
      return;
    }
    p.deleted = true;
    JobRun j = p.job;
    boolean running = p.process != null && p.process.isAlive();
    if (replacesTerminating(j) && running) {
      synchronized (j) {
        if (!j.finished && !j.deleted && !p.settled) {
          p.settled = true;
          newPod(j);
        }
      }
    }
    if (!running) {
      if (p.process == null) {
        // Never started: it ends as failed, as a pod deleted before its container ran.
        podEnded(p, 137, List.of());
      }
      return;
    }
    long grace =
        (requests == null
                ? Optional.<com.fasterxml.jackson.databind.JsonNode>empty()
                : requests.lastDeleteOptions("/api/v1/namespaces/" + j.ns + "/pods/" + p.name))
            .filter(o -> o.hasNonNull("gracePeriodSeconds"))
            .map(o -> o.get("gracePeriodSeconds").asLong())
            .orElseGet(
                () -> {
                  Long g =
                      j.job.getSpec().getTemplate().getSpec().getTerminationGracePeriodSeconds();
                  return g == null ? 30 : g;
                });
    beforeStop.accept(p.name);
    p.process.destroy();
    try {
      if (!p.process.waitFor(grace, TimeUnit.SECONDS)) {
        killTree(p);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Whether the Job controller makes a new pod as soon as one is terminating: by the Job's {@code
   * podReplacementPolicy} (default {@code Failed} with a {@code podFailurePolicy}, else {@code
   * TerminatingOrFailed}), unless it is one that ignores the field ({@link #replaceDeletedPods}).
   */
  private boolean replacesTerminating(JobRun j) {
    if (replaceDeletedPods) {
      return true;
    }
    String policy = j.job.getSpec().getPodReplacementPolicy();
    if (policy == null) {
      policy = j.job.getSpec().getPodFailurePolicy() == null ? "TerminatingOrFailed" : "Failed";
    }
    return policy.equals("TerminatingOrFailed");
  }

  private static void killTree(PodRun p) {
    Process process = p.process;
    if (process != null) {
      process.descendants().forEach(ProcessHandle::destroyForcibly);
      process.destroyForcibly();
      try {
        process.waitFor(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private void waiting(PodRun p, String reason, String message) {
    updatePod(
        p,
        pod ->
            pod.getStatus()
                .setContainerStatuses(
                    List.of(
                        new ContainerStatusBuilder()
                            .withName("provisionerd")
                            .withState(
                                new ContainerStateBuilder()
                                    .withNewWaiting()
                                    .withReason(reason)
                                    .withMessage(message)
                                    .endWaiting()
                                    .build())
                            .build())));
  }

  private static PodCondition condition(String type, String status, String reason, String message) {
    return new PodConditionBuilder()
        .withType(type)
        .withStatus(status)
        .withReason(reason)
        .withMessage(message)
        .withLastTransitionTime(Instant.now().toString())
        .build();
  }

  /**
   * Changes the pod as stored and writes it back, again on a conflict (another writer came first),
   * as controllers do; null when the pod is gone.
   */
  private Pod updatePod(PodRun p, Consumer<Pod> change) {
    return untilAnswered(() -> updatePodOnce(p, change));
  }

  /**
   * On a real API server, what a call needs done is done once it answers: a kubelet or controller
   * whose API server is away syncs again until it is back (the mock's calls are made once).
   */
  private <T> T untilAnswered(java.util.function.Supplier<T> call) {
    while (true) {
      try {
        return call.get();
      } catch (io.fabric8.kubernetes.client.KubernetesClientException e) {
        if (tokens != null || e.getCode() > 0 || work.isShutdown()) {
          throw e;
        }
      }
      try {
        Thread.sleep(1000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted");
      }
    }
  }

  private Pod updatePodOnce(PodRun p, Consumer<Pod> change) {
    for (int i = 0; ; i++) {
      Pod pod = api.pods().inNamespace(p.job.ns).withName(p.name).get();
      if (pod == null) {
        return null;
      }
      if (pod.getStatus() == null) {
        pod.setStatus(new io.fabric8.kubernetes.api.model.PodStatus());
      }
      change.accept(pod);
      try {
        return tokens == null
            ? api.pods().inNamespace(p.job.ns).resource(pod).updateStatus()
            : api.pods().inNamespace(p.job.ns).resource(pod).update();
      } catch (io.fabric8.kubernetes.client.KubernetesClientException e) {
        if (e.getCode() == 404) {
          return null; // deleted since it was read
        }
        if (e.getCode() != 409 || i == 9) {
          throw e;
        }
      }
    }
  }

  private void updateJob(JobRun j, Consumer<JobStatusBuilder> change) {
    untilAnswered(
        () -> {
          updateJobOnce(j, change);
          return null;
        });
  }

  private void updateJobOnce(JobRun j, Consumer<JobStatusBuilder> change) {
    for (int i = 0; ; i++) {
      Job stored = api.batch().v1().jobs().inNamespace(j.ns).withName(j.name).get();
      if (stored == null) {
        return;
      }
      JobStatusBuilder s =
          new JobStatusBuilder(stored.getStatus() == null ? new JobStatus() : stored.getStatus());
      change.accept(s);
      stored.setStatus(s.build());
      try {
        if (tokens == null) {
          api.batch().v1().jobs().inNamespace(j.ns).resource(stored).updateStatus();
        } else {
          api.batch().v1().jobs().inNamespace(j.ns).resource(stored).update();
        }
        return;
      } catch (io.fabric8.kubernetes.client.KubernetesClientException e) {
        if (e.getCode() == 404) {
          return; // deleted since it was read
        }
        if (e.getCode() != 409 || i == 9) {
          throw e;
        }
      }
    }
  }

  /**
   * Creates the pod; on a real API server, again while the namespace's default ServiceAccount is
   * not there yet (its controller makes it just after the namespace; the ServiceAccount admission
   * plugin refuses a pod of an account that does not exist), as the Job controller tries again.
   */
  private void createPod(String ns, Pod pod) {
    for (int i = 0; ; i++) {
      try {
        api.pods().inNamespace(ns).resource(pod).create();
        return;
      } catch (io.fabric8.kubernetes.client.KubernetesClientException e) {
        if (tokens != null || e.getCode() != 403 || i == 50) {
          throw e;
        }
      }
      try {
        Thread.sleep(200);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  /** A token of the pod's ServiceAccount bound to the pod, from a real API server. */
  private String tokenRequest(Pod pod, String audience, long ttl) {
    String account =
        pod.getSpec().getServiceAccountName() == null
            ? "default"
            : pod.getSpec().getServiceAccountName();
    var request =
        new io.fabric8.kubernetes.api.model.authentication.TokenRequestBuilder()
            .withNewSpec()
            .withAudiences(audience == null ? List.of() : List.of(audience))
            .withExpirationSeconds(ttl)
            .withNewBoundObjectRef()
            .withApiVersion("v1")
            .withKind("Pod")
            .withName(pod.getMetadata().getName())
            .withUid(pod.getMetadata().getUid())
            .endBoundObjectRef()
            .endSpec()
            .build();
    return api.serviceAccounts()
        .inNamespace(pod.getMetadata().getNamespace())
        .withName(account)
        .tokenRequest(request)
        .getStatus()
        .getToken();
  }

  /** The informers of a kubelet on a real API server. */
  private final List<io.fabric8.kubernetes.client.informers.SharedIndexInformer<?>> informers =
      new ArrayList<>();

  @Override
  public void close() {
    watches.forEach(Watch::close);
    informers.forEach(io.fabric8.kubernetes.client.informers.SharedIndexInformer::close);
    for (PodRun p : pods.values()) {
      killTree(p);
    }
    timers.shutdownNow();
    work.shutdownNow();
    // Nothing of the kubelet's may call the API server once it closes: a request in flight then
    // holds a connection the server waits on.
    try {
      if (!work.awaitTermination(20, TimeUnit.SECONDS)) {
        System.err.println("test kubelet: work still running 20 s after close");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
