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
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobConditionBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.JobStatusBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.Watch;
import io.fabric8.kubernetes.client.Watcher;
import io.fabric8.kubernetes.client.WatcherException;
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
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The Job controller and the kubelet, for tests: each Job created on the mock API server gets a
 * Pod, whose {@code provisionerd} container runs as a local process ({@code oneshot provisionerd}
 * from the test class path) with the container's environment, its Secret-backed variables read from
 * the API. Pod and Job status are written as the real controllers would: scheduled, running, then
 * Succeeded/Complete or Failed/Failed. A deleted Job takes its process with it. Tests can hold a
 * Job's pod unschedulable, evict it, or have it OOMKilled.
 *
 * <p>Its limits: no real scheduling, images or resource limits; a volume mount is a directory of
 * the run, seen only through variables that name a path under it; status is written with plain
 * updates (the mock lets them overwrite status).
 */
public final class FakeKubelet implements AutoCloseable {
  private final KubernetesClient api;
  private final List<String> namespaces;
  private final Path workRoot;
  private final Map<String, Run> runs = new ConcurrentHashMap<>();
  private final Set<String> held = ConcurrentHashMap.newKeySet();
  private final List<Watch> watches = new ArrayList<>();
  private final ExecutorService work = Executors.newVirtualThreadPerTaskExecutor();
  private volatile Consumer<String> beforeStart = name -> {};

  /** Every Job this kubelet saw created, by namespace/name, in order. */
  public final List<String> jobsSeen = new CopyOnWriteArrayList<>();

  /** One Job's pod and process. */
  private static final class Run {
    final Job job;
    final String ns;
    final String pod;
    final Path dir;
    volatile Process process;
    volatile String ending;

    Run(Job job, String pod, Path dir) {
      this.job = job;
      this.ns = job.getMetadata().getNamespace();
      this.pod = pod;
      this.dir = dir;
    }
  }

  FakeKubelet(KubernetesClient api, List<String> namespaces, Path workRoot) {
    this.api = api;
    this.namespaces = List.copyOf(namespaces);
    this.workRoot = workRoot;
  }

  void start() {
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
                        work.execute(() -> deleted(job));
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

  /**
   * Called with the Job's name after its pod is reported running and before its process starts, on
   * the kubelet's thread: a test can wait there for what should be seen before provisionerd runs.
   */
  public void beforeStart(Consumer<String> hook) {
    this.beforeStart = hook;
  }

  /** Keeps the pods of Jobs with this name pending ("Unschedulable") until {@link #release}. */
  public void hold(String jobName) {
    held.add(jobName);
  }

  public void release(String ns, String jobName) {
    held.remove(jobName);
    Run r = runs.get(key(ns, jobName));
    if (r != null && r.process == null) {
      work.execute(() -> run(r));
    }
  }

  private void begin(Job job) {
    String ns = job.getMetadata().getNamespace();
    String name = job.getMetadata().getName();
    if (runs.containsKey(key(ns, name))) {
      return;
    }
    jobsSeen.add(key(ns, name));
    String podName =
        name
            + "-"
            + Long.toString(ThreadLocalRandom.current().nextLong(36 * 36 * 36 * 36 * 36), 36);
    Path dir;
    try {
      dir = Files.createDirectories(workRoot.resolve(podName));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Run run = new Run(job, podName, dir);
    runs.put(key(ns, name), run);
    Map<String, String> labels = new LinkedHashMap<>();
    Map<String, String> fromTemplate = job.getSpec().getTemplate().getMetadata().getLabels();
    if (fromTemplate != null) {
      labels.putAll(fromTemplate);
    }
    labels.put("job-name", name);
    labels.put("batch.kubernetes.io/job-name", name);
    labels.put("controller-uid", job.getMetadata().getUid());
    boolean hold = held.contains(name);
    Pod pod =
        new PodBuilder()
            .withNewMetadata()
            .withName(podName)
            .withNamespace(ns)
            .withLabels(labels)
            .withOwnerReferences(
                new OwnerReferenceBuilder()
                    .withApiVersion("batch/v1")
                    .withKind("Job")
                    .withName(name)
                    .withUid(job.getMetadata().getUid())
                    .withController(true)
                    .build())
            .endMetadata()
            .withSpec(job.getSpec().getTemplate().getSpec())
            .withNewStatus()
            .withPhase("Pending")
            .withConditions(
                hold
                    ? condition(
                        "PodScheduled",
                        "False",
                        "Unschedulable",
                        "0/3 nodes are available: 3 Insufficient memory.")
                    : condition("PodScheduled", "True", null, null))
            .endStatus()
            .build();
    if (!hold) {
      pod.getSpec().setNodeName("fake-node-1");
    }
    api.pods().inNamespace(ns).resource(pod).create();
    if (!hold) {
      run(run);
    }
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

  private void run(Run r) {
    Container c =
        r.job.getSpec().getTemplate().getSpec().getContainers().stream()
            .filter(x -> x.getName().equals("provisionerd"))
            .findFirst()
            .orElseThrow();
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(
        List.of(
            "-Dio.netty.noUnsafe=true",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            System.getProperty("java.class.path"),
            "io.oneshot.cli.Main"));
    cmd.addAll(
        c.getArgs() == null || c.getArgs().isEmpty() ? List.of("provisionerd") : c.getArgs());
    ProcessBuilder pb = new ProcessBuilder(cmd).directory(r.dir.toFile());
    Map<String, String> env = pb.environment();
    env.clear();
    env.put("PATH", System.getenv().getOrDefault("PATH", "/usr/bin:/bin"));
    env.put("LANG", "C.UTF-8");
    env.put("HOME", r.dir.toString());
    Pod self = api.pods().inNamespace(r.ns).withName(r.pod).get();
    for (EnvVar e : c.getEnv() == null ? List.<EnvVar>of() : c.getEnv()) {
      if (e.getValue() != null) {
        env.put(e.getName(), e.getValue());
      } else if (e.getValueFrom() != null && e.getValueFrom().getFieldRef() != null) {
        // The downward API, for the fields oneshot reads.
        String path = e.getValueFrom().getFieldRef().getFieldPath();
        String v =
            switch (path) {
              case "metadata.name" -> r.pod;
              case "metadata.uid" -> self == null ? null : self.getMetadata().getUid();
              case "metadata.namespace" -> r.ns;
              default -> throw new IllegalStateException("fake kubelet: no fieldRef " + path);
            };
        if (v != null) {
          env.put(e.getName(), v);
        }
      } else if (e.getValueFrom() != null && e.getValueFrom().getSecretKeyRef() != null) {
        var ref = e.getValueFrom().getSecretKeyRef();
        Secret s = api.secrets().inNamespace(r.ns).withName(ref.getName()).get();
        if (s == null) {
          waiting(r, "CreateContainerConfigError", "secret \"" + ref.getName() + "\" not found");
          return;
        }
        env.put(
            e.getName(),
            new String(
                Base64.getDecoder().decode(s.getData().get(ref.getKey())), StandardCharsets.UTF_8));
      }
    }
    // Mounts become directories of the run: a variable naming a path under a mount is moved there.
    for (var m : c.getVolumeMounts() == null ? List.<VolumeMount>of() : c.getVolumeMounts()) {
      Path local = r.dir.resolve("volumes").resolve(m.getName());
      try {
        Files.createDirectories(local);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      env.replaceAll(
          (k, v) ->
              v.equals(m.getMountPath()) || v.startsWith(m.getMountPath() + "/")
                  ? local + v.substring(m.getMountPath().length())
                  : v);
    }
    env.put("ONESHOT_WORK_DIR", r.dir.resolve("work").toString());
    pb.redirectOutput(r.dir.resolve("stdout.log").toFile());
    pb.redirectError(r.dir.resolve("stderr.log").toFile());
    updatePod(
        r,
        p -> {
          p.getStatus().setPhase("Running");
          p.getStatus()
              .setContainerStatuses(
                  List.of(
                      new ContainerStatusBuilder()
                          .withName("provisionerd")
                          .withReady(true)
                          .withState(
                              new ContainerStateBuilder()
                                  .withNewRunning()
                                  .withStartedAt(Instant.now().toString())
                                  .endRunning()
                                  .build())
                          .build()));
        });
    beforeStart.accept(r.job.getMetadata().getName());
    try {
      Files.createDirectories(r.dir.resolve("work"));
      r.process = pb.start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    updateJob(r, "active", null, null);
    r.process.onExit().thenRun(() -> work.execute(() -> exited(r)));
  }

  private void waiting(Run r, String reason, String message) {
    updatePod(
        r,
        p ->
            p.getStatus()
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

  private void exited(Run r) {
    if (r.ending != null) {
      return;
    }
    int code = r.process.exitValue();
    if (code != 0) {
      try {
        System.err.println(
            "fake kubelet: "
                + r.pod
                + " exited with "
                + code
                + "; its stderr:\n"
                + Files.readString(r.dir.resolve("stderr.log"))
                + "\nits stdout ends: "
                + tailOf(Files.readString(r.dir.resolve("stdout.log"))));
      } catch (IOException e) {
        // nothing to show
      }
    }
    terminate(r, code, code == 0 ? "Completed" : "Error", null, null);
    if (code == 0) {
      updateJob(r, "Complete", null, null);
    } else {
      updateJob(r, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit");
    }
  }

  private static String tailOf(String s) {
    return s.length() > 600 ? s.substring(s.length() - 600) : s;
  }

  private void terminate(Run r, int code, String reason, String podReason, String podMessage) {
    updatePod(
        r,
        p -> {
          p.getStatus().setPhase(code == 0 ? "Succeeded" : "Failed");
          if (podReason != null) {
            p.getStatus().setReason(podReason);
            p.getStatus().setMessage(podMessage);
          }
          p.getStatus()
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
  }

  /** The pod of this Job is evicted (as by the Eviction API): the Job fails by its policy. */
  public void evict(String ns, String jobName) {
    Run r = runs.get(key(ns, jobName));
    r.ending = "evicted";
    updatePod(
        r,
        p -> {
          List<PodCondition> cs = new ArrayList<>(p.getStatus().getConditions());
          cs.add(
              condition(
                  "DisruptionTarget", "True", "EvictionByEvictionAPI", "Eviction API: evicting"));
          p.getStatus().setConditions(cs);
        });
    kill(r);
    terminate(r, 137, "Error", "Evicted", "The node was low on resource: memory.");
    updateJob(
        r,
        "Failed",
        "PodFailurePolicy",
        "Pod "
            + ns
            + "/"
            + r.pod
            + " has condition DisruptionTarget matching FailJob rule at index 0");
  }

  /** The provisionerd container of this Job's pod is killed for memory. */
  public void oomKill(String ns, String jobName) {
    Run r = runs.get(key(ns, jobName));
    r.ending = "oom";
    kill(r);
    terminate(r, 137, "OOMKilled", null, null);
    updateJob(r, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit");
  }

  /** What the pod wrote to stdout: what {@code kubectl logs} shows. */
  public String podLog(String ns, String jobName) {
    Run r = runs.get(key(ns, jobName));
    try {
      return r == null ? "" : Files.readString(r.dir.resolve("stdout.log"));
    } catch (IOException e) {
      return "";
    }
  }

  /** Whether this Job's process is running. */
  public boolean running(String ns, String jobName) {
    Run r = runs.get(key(ns, jobName));
    return r != null && r.process != null && r.process.isAlive();
  }

  private void deleted(Job job) {
    Run r = runs.get(key(job.getMetadata().getNamespace(), job.getMetadata().getName()));
    if (r == null) {
      return;
    }
    r.ending = "deleted";
    if (r.process != null && r.process.isAlive()) {
      r.process.destroy();
      try {
        if (!r.process.waitFor(10, TimeUnit.SECONDS)) {
          kill(r);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    api.pods().inNamespace(r.ns).withName(r.pod).delete();
  }

  private static void kill(Run r) {
    if (r.process != null) {
      r.process.descendants().forEach(ProcessHandle::destroyForcibly);
      r.process.destroyForcibly();
      try {
        r.process.waitFor(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private void updatePod(Run r, java.util.function.Consumer<Pod> change) {
    Pod p = api.pods().inNamespace(r.ns).withName(r.pod).get();
    if (p == null) {
      return;
    }
    change.accept(p);
    api.pods().inNamespace(r.ns).resource(p).update();
  }

  private void updateJob(Run r, String state, String reason, String message) {
    Job j = api.batch().v1().jobs().inNamespace(r.ns).withName(r.job.getMetadata().getName()).get();
    if (j == null) {
      return;
    }
    String now = Instant.now().toString();
    JobStatusBuilder s =
        new JobStatusBuilder(
            j.getStatus() == null
                ? new io.fabric8.kubernetes.api.model.batch.v1.JobStatus()
                : j.getStatus());
    switch (state) {
      case "active" -> s.withActive(1).withStartTime(now);
      case "Complete" ->
          s.withActive(0)
              .withSucceeded(1)
              .withCompletionTime(now)
              .withConditions(
                  new JobConditionBuilder()
                      .withType("Complete")
                      .withStatus("True")
                      .withLastTransitionTime(now)
                      .build());
      default ->
          s.withActive(0)
              .withFailed(1)
              .withConditions(
                  new JobConditionBuilder()
                      .withType("Failed")
                      .withStatus("True")
                      .withReason(reason)
                      .withMessage(message)
                      .withLastTransitionTime(now)
                      .build());
    }
    j.setStatus(s.build());
    api.batch().v1().jobs().inNamespace(r.ns).resource(j).update();
  }

  @Override
  public void close() {
    watches.forEach(Watch::close);
    for (Run r : runs.values()) {
      kill(r);
    }
    work.shutdownNow();
  }
}
