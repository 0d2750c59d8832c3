package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.Capabilities;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerBuilder;
import io.fabric8.kubernetes.api.model.PodSecurityContext;
import io.fabric8.kubernetes.api.model.PodSecurityContextBuilder;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.PodSpecBuilder;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.ResourceRequirements;
import io.fabric8.kubernetes.api.model.SeccompProfile;
import io.fabric8.kubernetes.api.model.SecurityContext;
import io.fabric8.kubernetes.api.model.SecurityContextBuilder;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.apps.DeploymentBuilder;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.config.OneshotConfig;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Makes a route's balloons: a Deployment whose pods have the shape of the route's build pods, from
 * its Job template, and do nothing.
 *
 * <p>What a balloon keeps of the template's pod: the node selector, affinity, tolerations, topology
 * spread, runtime class, scheduler, host network and image pull secrets (so that it lands where the
 * route's builds land), the provisionerd container's image (so that the node has it pulled) and the
 * room the pod asks for: the requests of all its containers added up, or of its largest init
 * container where that is more, as the scheduler counts a pod (each resource's request is its limit
 * where only a limit is given). It asks for exactly that, as requests and as limits. What it does
 * not keep: the template's volumes, environment, labels and annotations (a balloon is no build: no
 * selector of build pods, a budget or a network policy, should take it for one), its service
 * account's token, and its priority: balloons run at the launcher's {@code balloonPriorityClass},
 * below every build, end at once when preempted ({@code terminationGracePeriodSeconds: 0}) and run
 * the route's {@code warm.command}.
 *
 * <p>Why a Deployment per route: Kubernetes itself brings a preempted balloon back (pending, it
 * asks the cluster autoscaler or Karpenter for a node), with no dispatcher needed in between; the
 * leader sets one number per route ({@code spec.replicas}); balloons outlive a dispatcher's restart
 * or failover, so warm room is not lost while leadership changes hands.
 */
final class BalloonFactory {
  /** The label, on a balloon Deployment and its pods, naming the route. */
  static final String BALLOONS = "oneshot.io/balloons";

  /** The annotation holding a digest of the pod template, to see when the template changed. */
  static final String SPEC = "oneshot.io/balloon-spec";

  /** The name prefix of a route's balloon Deployment (and so of its pods). */
  static final String PREFIX = "oneshot-balloons-";

  private final JobTemplates templates;
  private final String defaultNamespace;
  private final String priorityClass;
  private final KubernetesSerialization serialization;

  BalloonFactory(
      JobTemplates templates,
      String defaultNamespace,
      String priorityClass,
      KubernetesSerialization serialization) {
    this.templates = templates;
    this.defaultNamespace = defaultNamespace;
    this.priorityClass = priorityClass;
    this.serialization = serialization;
  }

  String priorityClass() {
    return priorityClass;
  }

  static String name(String route) {
    return PREFIX + route;
  }

  /**
   * The route a balloon pod's name belongs to ({@code oneshot-balloons-ROUTE-HASH-ID}), or null.
   */
  static String routeOfPod(String podName) {
    if (podName == null || !podName.startsWith(PREFIX)) {
      return null;
    }
    int id = podName.lastIndexOf('-');
    int hash = id <= 0 ? -1 : podName.lastIndexOf('-', id - 1);
    return hash <= PREFIX.length() ? null : podName.substring(PREFIX.length(), hash);
  }

  String namespace(OneshotConfig.Route route) {
    return route.namespace() != null ? route.namespace() : defaultNamespace;
  }

  /**
   * The PriorityClass the route's build pods run at (their template's), or null for the default.
   */
  String buildPriorityClass(OneshotConfig.Route route) {
    return templates.get(route.template()).getSpec().getTemplate().getSpec().getPriorityClassName();
  }

  /** The route's balloon Deployment with {@code replicas} balloons. */
  Deployment deployment(OneshotConfig.Route route, int replicas) {
    PodSpec pod = pod(route);
    Map<String, String> labels = new LinkedHashMap<>();
    labels.put(JobFactory.MANAGED_BY, JobFactory.MANAGER);
    labels.put("app.kubernetes.io/component", "balloon");
    labels.put(BALLOONS, route.name());
    return new DeploymentBuilder()
        .withNewMetadata()
        .withName(name(route.name()))
        .withNamespace(namespace(route))
        .withLabels(labels)
        .withAnnotations(Map.of(SPEC, digest(pod)))
        .endMetadata()
        .withNewSpec()
        .withReplicas(replicas)
        .withRevisionHistoryLimit(0)
        .withNewStrategy()
        .withType("Recreate")
        .endStrategy()
        .withNewSelector()
        .withMatchLabels(Map.of(BALLOONS, route.name()))
        .endSelector()
        .withNewTemplate()
        .withNewMetadata()
        .withLabels(labels)
        .endMetadata()
        .withSpec(pod)
        .endTemplate()
        .endSpec()
        .build();
  }

  /** A digest of what a balloon pod is: a Deployment whose annotation differs is made anew. */
  String digest(PodSpec pod) {
    try {
      byte[] d =
          MessageDigest.getInstance("SHA-256")
              .digest(serialization.asJson(pod).getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(d, 0, 12);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private PodSpec pod(OneshotConfig.Route route) {
    PodSpec src = templates.get(route.template()).getSpec().getTemplate().getSpec();
    Container provisionerd =
        src.getContainers().stream()
            .filter(c -> JobTemplates.CONTAINER.equals(c.getName()))
            .findFirst()
            .orElseThrow();
    Map<String, Quantity> room = room(src);
    ResourceRequirements resources = new ResourceRequirements();
    if (!room.isEmpty()) {
      resources.setRequests(room);
      resources.setLimits(new TreeMap<>(room));
    }
    SecurityContext sc =
        provisionerd.getSecurityContext() == null
            ? new SecurityContext()
            : new SecurityContextBuilder(provisionerd.getSecurityContext()).build();
    if (sc.getAllowPrivilegeEscalation() == null) {
      sc.setAllowPrivilegeEscalation(false);
    }
    if (sc.getCapabilities() == null) {
      sc.setCapabilities(new Capabilities(null, List.of("ALL")));
    }
    Container balloon =
        new ContainerBuilder()
            .withName("balloon")
            .withImage(provisionerd.getImage())
            .withImagePullPolicy(provisionerd.getImagePullPolicy())
            .withCommand(route.warm().command())
            .withResources(resources)
            .withSecurityContext(sc)
            .build();
    PodSecurityContext psc =
        src.getSecurityContext() == null
            ? new PodSecurityContext()
            : new PodSecurityContextBuilder(src.getSecurityContext()).build();
    if (psc.getRunAsNonRoot() == null) {
      psc.setRunAsNonRoot(true);
    }
    if (psc.getSeccompProfile() == null) {
      psc.setSeccompProfile(new SeccompProfile(null, "RuntimeDefault"));
    }
    return new PodSpecBuilder()
        .withNodeSelector(src.getNodeSelector())
        .withAffinity(src.getAffinity())
        .withTolerations(src.getTolerations())
        .withTopologySpreadConstraints(src.getTopologySpreadConstraints())
        .withRuntimeClassName(src.getRuntimeClassName())
        .withSchedulerName(src.getSchedulerName())
        .withHostNetwork(src.getHostNetwork())
        .withImagePullSecrets(src.getImagePullSecrets())
        .withServiceAccountName(src.getServiceAccountName())
        .withAutomountServiceAccountToken(false)
        .withEnableServiceLinks(false)
        .withPriorityClassName(priorityClass)
        .withTerminationGracePeriodSeconds(0L)
        .withSecurityContext(psc)
        .withContainers(balloon)
        .build();
  }

  /**
   * The room a pod of the template asks the scheduler for, per resource: its containers' requests
   * added up, or its largest init container's where that is more (a request not given is the limit,
   * as the API server defaults it).
   */
  static Map<String, Quantity> room(PodSpec pod) {
    Map<String, Quantity> sum = new TreeMap<>();
    for (Container c : pod.getContainers()) {
      requests(c).forEach((k, v) -> sum.merge(k, v, Quantity::add));
    }
    if (pod.getInitContainers() != null) {
      for (Container c : pod.getInitContainers()) {
        requests(c).forEach((k, v) -> sum.merge(k, v, (a, b) -> a.compareTo(b) >= 0 ? a : b));
      }
    }
    sum.values().removeIf(q -> q.getNumericalAmount().signum() == 0);
    return sum;
  }

  private static Map<String, Quantity> requests(Container c) {
    Map<String, Quantity> out = new TreeMap<>();
    ResourceRequirements r = c.getResources();
    if (r == null) {
      return out;
    }
    if (r.getLimits() != null) {
      out.putAll(r.getLimits());
    }
    if (r.getRequests() != null) {
      out.putAll(r.getRequests());
    }
    return out;
  }
}
