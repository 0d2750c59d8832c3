package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.KubernetesResource;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobSpec;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.config.ConfigException;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Job templates the routes name, loaded and checked once at start. A template is a {@code
 * batch/v1} Job whose pod has a container named {@code provisionerd}; the code sets only its
 * identity and safe defaults per attempt ({@link JobFactory}). Anything that would run a build
 * twice is refused: a pod restart policy other than {@code Never}, a {@code backoffLimit} above 0,
 * more than one completion or parallel pod (oneshot retries with a new attempt and a new token
 * itself).
 */
public final class JobTemplates {
  public static final String CONTAINER = "provisionerd";

  private final Map<String, Job> byName;

  private JobTemplates(Map<String, Job> byName) {
    this.byName = byName;
  }

  /** Loads every template the routes name from {@code dir}; errors name the route and the rule. */
  public static JobTemplates load(
      Path dir, List<OneshotConfig.Route> routes, KubernetesSerialization serialization) {
    Map<String, Job> byName = new LinkedHashMap<>();
    for (int i = 0; i < routes.size(); i++) {
      OneshotConfig.Route route = routes.get(i);
      String name = route.template();
      try {
        if (!byName.containsKey(name)) {
          byName.put(name, parse(dir.resolve(name), serialization));
        }
        checkGrace(dir.resolve(name), byName.get(name), route);
      } catch (ConfigException e) {
        throw new ConfigException("routes[" + i + "].template: " + e.getMessage(), e);
      }
    }
    return new JobTemplates(byName);
  }

  /** Reads and checks one template; the message of a refusal starts with the file. */
  public static Job parse(Path file, KubernetesSerialization serialization) {
    String text = ConfigLoader.readFile(file);
    Object parsed;
    try {
      parsed = serialization.unmarshal(text, KubernetesResource.class);
    } catch (RuntimeException e) {
      throw new ConfigException(file + ": not a Kubernetes manifest: " + rootMessage(e), e);
    }
    if (!(parsed instanceof Job job) || !"batch/v1".equals(job.getApiVersion())) {
      throw new ConfigException(
          file + ": not a batch/v1 Job" + describe(parsed) + "; a template is a Job manifest");
    }
    check(file, job);
    return job;
  }

  /** How much longer than the route's cancel grace a build pod's termination grace must be. */
  static final long GRACE_MARGIN_SECONDS = 30;

  /**
   * The termination grace a pod of this route needs: the kubelet sends SIGTERM, provisionerd passes
   * it on and waits the route's cancel grace for terraform to write its state, then reports. A
   * shorter grace would SIGKILL terraform first.
   */
  static long minimumGraceSeconds(OneshotConfig.Route route) {
    return route.cancelGrace().toSeconds() + GRACE_MARGIN_SECONDS;
  }

  private static void checkGrace(Path file, Job job, OneshotConfig.Route route) {
    Long grace = job.getSpec().getTemplate().getSpec().getTerminationGracePeriodSeconds();
    long needed = minimumGraceSeconds(route);
    if (grace != null && grace < needed) {
      throw new ConfigException(
          file
              + ": spec.template.spec.terminationGracePeriodSeconds: "
              + grace
              + " is shorter than route "
              + route.name()
              + "'s cancelGrace ("
              + route.cancelGrace().toSeconds()
              + "s) plus "
              + GRACE_MARGIN_SECONDS
              + "s: the kubelet would kill terraform before it writes its state. Set at least "
              + needed
              + ", or leave it out");
    }
  }

  private static void check(Path file, Job job) {
    JobSpec spec = job.getSpec();
    if (spec == null || spec.getTemplate() == null || spec.getTemplate().getSpec() == null) {
      throw new ConfigException(file + ": spec.template.spec is missing");
    }
    var pod = spec.getTemplate().getSpec();
    List<Container> containers = pod.getContainers() == null ? List.of() : pod.getContainers();
    if (containers.stream().noneMatch(c -> CONTAINER.equals(c.getName()))) {
      throw new ConfigException(
          file
              + ": spec.template.spec.containers has no container named "
              + CONTAINER
              + "; oneshot runs `oneshot provisionerd` in it");
    }
    String restart = pod.getRestartPolicy();
    if (restart != null && !restart.equals("Never")) {
      throw new ConfigException(
          file
              + ": spec.template.spec.restartPolicy: "
              + restart
              + " would start provisionerd again and run the build twice; use Never (the"
              + " default)");
    }
    if (spec.getBackoffLimit() != null && spec.getBackoffLimit() != 0) {
      throw new ConfigException(
          file
              + ": spec.backoffLimit: "
              + spec.getBackoffLimit()
              + " would retry the pod and run the build twice; oneshot retries with a new"
              + " attempt itself. Remove it (or set 0)");
    }
    String replacement = spec.getPodReplacementPolicy();
    if (replacement != null && !replacement.equals("Failed")) {
      throw new ConfigException(
          file
              + ": spec.podReplacementPolicy: "
              + replacement
              + " would start a second pod while the first is still terminating; use Failed (the"
              + " default oneshot sets)");
    }
    if (above1(spec.getCompletions()) || above1(spec.getParallelism())) {
      throw new ConfigException(
          file + ": spec.completions and spec.parallelism must be 1: one build, one pod");
    }
    if (spec.getSelector() != null || Boolean.TRUE.equals(spec.getManualSelector())) {
      throw new ConfigException(
          file + ": spec.selector is set by Kubernetes for each Job; remove it");
    }
  }

  private static boolean above1(Integer n) {
    return n != null && n > 1;
  }

  private static String describe(Object parsed) {
    if (parsed instanceof KubernetesResource
        && parsed instanceof io.fabric8.kubernetes.api.model.HasMetadata h) {
      return " (it is " + h.getApiVersion() + " " + h.getKind() + ")";
    }
    return "";
  }

  private static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null) {
      t = t.getCause();
    }
    return t.getMessage();
  }

  /** The template a route names (checked at start). */
  public Job get(String name) {
    Job job = byName.get(name);
    if (job == null) {
      throw new IllegalArgumentException("no template " + name + " was loaded");
    }
    return job;
  }
}
