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
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

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

  /**
   * Loads every template the routes name from {@code dir}. Every problem of every template is
   * reported at once, each naming the route, the file and the rule.
   */
  public static JobTemplates load(
      Path dir, List<OneshotConfig.Route> routes, KubernetesSerialization serialization) {
    Map<String, Job> byName = new LinkedHashMap<>();
    Set<String> refused = new HashSet<>();
    List<String> problems = new ArrayList<>();
    for (int i = 0; i < routes.size(); i++) {
      OneshotConfig.Route route = routes.get(i);
      String name = route.template();
      String where = "routes[" + i + "].template: ";
      Path file = dir.resolve(name);
      if (!byName.containsKey(name) && !refused.contains(name)) {
        List<String> found = new ArrayList<>();
        Job job = read(file, serialization, found);
        if (found.isEmpty()) {
          byName.put(name, job);
        } else {
          refused.add(name);
          found.forEach(p -> problems.add(where + p));
        }
      }
      Job job = byName.get(name);
      String grace = job == null ? null : graceProblem(job, route);
      if (grace != null) {
        problems.add(where + file + ": " + grace);
      }
    }
    if (!problems.isEmpty()) {
      throw ConfigException.of(problems);
    }
    return new JobTemplates(byName);
  }

  /** Reads and checks one template; a refusal names the file and every rule it breaks. */
  public static Job parse(Path file, KubernetesSerialization serialization) {
    List<String> problems = new ArrayList<>();
    Job job = read(file, serialization, problems);
    if (!problems.isEmpty()) {
      throw ConfigException.of(problems);
    }
    return job;
  }

  /** One template, or null; each problem found is added as {@code FILE: RULE}. */
  private static Job read(Path file, KubernetesSerialization serialization, List<String> problems) {
    String text;
    try {
      text = ConfigLoader.readFile(file);
    } catch (ConfigException e) {
      problems.add(e.getMessage());
      return null;
    }
    Object parsed;
    try {
      parsed = serialization.unmarshal(text, KubernetesResource.class);
    } catch (RuntimeException e) {
      problems.add(file + ": not a Kubernetes manifest: " + rootMessage(e));
      return null;
    }
    if (!(parsed instanceof Job job) || !"batch/v1".equals(job.getApiVersion())) {
      problems.add(
          file + ": not a batch/v1 Job" + describe(parsed) + "; a template is a Job manifest");
      return null;
    }
    problems(job).forEach(p -> problems.add(file + ": " + p));
    return job;
  }

  /** How much longer than the route's cancel grace a build pod's termination grace must be. */
  static final long GRACE_MARGIN_SECONDS = OneshotConfig.Route.GRACE_MARGIN.toSeconds();

  /**
   * The termination grace a pod of this route needs: the kubelet sends SIGTERM, provisionerd passes
   * it on and waits the route's cancel grace for terraform to write its state, then reports. A
   * shorter grace would SIGKILL terraform first.
   */
  static long minimumGraceSeconds(OneshotConfig.Route route) {
    return route.cancelGrace().toSeconds() + GRACE_MARGIN_SECONDS;
  }

  private static String graceProblem(Job job, OneshotConfig.Route route) {
    Long grace = job.getSpec().getTemplate().getSpec().getTerminationGracePeriodSeconds();
    long needed = minimumGraceSeconds(route);
    if (grace == null || grace >= needed) {
      return null;
    }
    return "spec.template.spec.terminationGracePeriodSeconds: "
        + grace
        + " is shorter than route "
        + route.name()
        + "'s cancelGrace ("
        + route.cancelGrace().toSeconds()
        + "s) plus "
        + GRACE_MARGIN_SECONDS
        + "s: the kubelet would kill terraform before it writes its state. Set at least "
        + needed
        + ", or leave it out";
  }

  /** Every rule of a template that {@code job} breaks; none when it can be used. */
  private static List<String> problems(Job job) {
    JobSpec spec = job.getSpec();
    if (spec == null || spec.getTemplate() == null || spec.getTemplate().getSpec() == null) {
      return List.of("spec.template.spec is missing");
    }
    List<String> problems = new ArrayList<>();
    var pod = spec.getTemplate().getSpec();
    List<Container> containers = pod.getContainers() == null ? List.of() : pod.getContainers();
    if (containers.stream().noneMatch(c -> CONTAINER.equals(c.getName()))) {
      problems.add(
          "spec.template.spec.containers has no container named "
              + CONTAINER
              + "; oneshot runs `oneshot provisionerd` in it");
    }
    String restart = pod.getRestartPolicy();
    if (restart != null && !restart.equals("Never")) {
      problems.add(
          "spec.template.spec.restartPolicy: "
              + restart
              + " would start provisionerd again and run the build twice; use Never (the"
              + " default)");
    }
    if (spec.getBackoffLimit() != null && spec.getBackoffLimit() != 0) {
      problems.add(
          "spec.backoffLimit: "
              + spec.getBackoffLimit()
              + " would retry the pod and run the build twice; oneshot retries with a new"
              + " attempt itself. Remove it (or set 0)");
    }
    String replacement = spec.getPodReplacementPolicy();
    if (replacement != null && !replacement.equals("Failed")) {
      problems.add(
          "spec.podReplacementPolicy: "
              + replacement
              + " would start a second pod while the first is still terminating; use Failed (the"
              + " default oneshot sets)");
    }
    if (above1(spec.getCompletions()) || above1(spec.getParallelism())) {
      problems.add("spec.completions and spec.parallelism must be 1: one build, one pod");
    }
    if (spec.getSelector() != null || Boolean.TRUE.equals(spec.getManualSelector())) {
      problems.add("spec.selector is set by Kubernetes for each Job; remove it");
    }
    return problems;
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
