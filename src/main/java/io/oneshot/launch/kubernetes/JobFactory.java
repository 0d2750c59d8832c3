package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.Capabilities;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.EnvVarBuilder;
import io.fabric8.kubernetes.api.model.ObjectMeta;
import io.fabric8.kubernetes.api.model.OwnerReference;
import io.fabric8.kubernetes.api.model.OwnerReferenceBuilder;
import io.fabric8.kubernetes.api.model.PodSecurityContext;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.PodTemplateSpec;
import io.fabric8.kubernetes.api.model.SeccompProfile;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.api.model.SecurityContext;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeBuilder;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.VolumeMountBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.JobSpec;
import io.fabric8.kubernetes.api.model.batch.v1.PodFailurePolicyBuilder;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.Attempt;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

/**
 * Makes the Job and the token Secret of one attempt from its route's template. The template's shape
 * is kept; the code sets the identity (name, namespace, labels), the token, the API URL, and the
 * safe defaults the template left unset: restart policy {@code Never}, no retries, {@code
 * podReplacementPolicy: Failed}, {@code activeDeadlineSeconds} from the route's launch timeout,
 * timeout and grace, {@code ttlSecondsAfterFinished}, a {@code podFailurePolicy} that fails the Job
 * at once on a disruption (so that no second pod of the same attempt is ever started; oneshot
 * requeues the build itself), a termination grace that lets a drained build finish (the route's
 * timeout and cancel grace, or its {@code drainGrace}), the pod's name and UID for provisionerd's
 * runner's name, no API token of its service account but a token of it for oneshot's audience alone
 * (the runner's proof, {@link KubernetesLauncher#prove}), and a restricted security context.
 */
final class JobFactory {
  static final String MANAGED_BY = "app.kubernetes.io/managed-by";

  /** The {@link #MANAGED_BY} label's value on everything the launcher makes. */
  static final String MANAGER = "oneshot";

  static final String BUILD = "oneshot.io/build";
  static final String ATTEMPT = "oneshot.io/attempt";
  static final String ROUTE = "oneshot.io/route";
  static final String TOKEN_KEY = "token";

  /**
   * The audience of the token that proves a build pod's runner: the API server's TokenReview
   * accepts it for oneshot alone, and no other API takes it (the API server's own audience is not
   * in it).
   */
  static final String AUDIENCE = "oneshot.io/runner";

  /** Where the proof is mounted in the provisionerd container, and its volume's name. */
  static final String PROOF_DIR = "/var/run/secrets/oneshot.io/runner";

  static final String PROOF_VOLUME = "oneshot-runner-proof";

  /**
   * How long a proof token lives; the kubelet writes a fresh one at 80% of it (and the minimum the
   * API server accepts is 600 s). provisionerd reads the file again for every call.
   */
  static final long PROOF_SECONDS = 3600;

  /**
   * The environment the code sets in the provisionerd container; a template's values are replaced.
   */
  static final java.util.Set<String> SET_BY_ONESHOT =
      java.util.Set.of(
          "ONESHOT_API_URL",
          "ONESHOT_TOKEN",
          "ONESHOT_TOKEN_FILE",
          "ONESHOT_BUILD_ID",
          "ONESHOT_ATTEMPT",
          "ONESHOT_POD_NAME",
          "ONESHOT_POD_UID",
          "ONESHOT_RUNNER_PROOF_FILE");

  /** Extra time past the route's timeout and grace before Kubernetes ends the Job itself. */
  static final long DEADLINE_SLACK_SECONDS = 60;

  private final JobTemplates templates;
  private final String defaultNamespace;
  private final int ttlSecondsAfterFinished;

  private final KubernetesSerialization serialization;

  JobFactory(JobTemplates templates, String defaultNamespace, int ttlSecondsAfterFinished) {
    this(templates, defaultNamespace, ttlSecondsAfterFinished, new KubernetesSerialization());
  }

  /** {@code serialization}: the client's, which the JSON sent must match. */
  JobFactory(
      JobTemplates templates,
      String defaultNamespace,
      int ttlSecondsAfterFinished,
      KubernetesSerialization serialization) {
    this.templates = templates;
    this.defaultNamespace = defaultNamespace;
    this.ttlSecondsAfterFinished = ttlSecondsAfterFinished;
    this.serialization = serialization;
  }

  String namespace(Attempt a) {
    return namespace(a.route());
  }

  /** The namespace of the route's Jobs: its own, else the launcher's. */
  String namespaceOf(OneshotConfig.Route route) {
    return namespace(route);
  }

  private String namespace(OneshotConfig.Route route) {
    return route.namespace() != null ? route.namespace() : defaultNamespace;
  }

  static Map<String, String> labels(Attempt a) {
    Map<String, String> l = new LinkedHashMap<>();
    l.put(MANAGED_BY, MANAGER);
    l.put(BUILD, Long.toString(a.buildId()));
    l.put(ATTEMPT, Integer.toString(a.attempt()));
    l.put(ROUTE, a.route().name());
    return l;
  }

  /**
   * The attempt's Job: its route's prepared Job, with the attempt's identity and environment set on
   * copies of the few objects that hold them ({@link ShallowCopy}); the rest is shared with the
   * prepared Job, which nobody changes. A deep copy of the template for every launch (the model's
   * builders, or before them a JSON round trip) was the largest part of a launch's own CPU in a
   * burst (docs/performance.md).
   */
  Job job(Attempt a) {
    Prepared p = prepared.computeIfAbsent(a.route(), this::prepare);
    Job job = ShallowCopy.of(p.job);
    ObjectMeta meta = ShallowCopy.of(p.job.getMetadata());
    meta.setName(a.name());
    meta.setLabels(merged(p.job.getMetadata().getLabels(), labels(a)));
    job.setMetadata(meta);

    JobSpec spec = ShallowCopy.of(p.job.getSpec());
    job.setSpec(spec);
    PodTemplateSpec template = ShallowCopy.of(spec.getTemplate());
    spec.setTemplate(template);
    ObjectMeta podMeta = ShallowCopy.of(template.getMetadata());
    podMeta.setLabels(merged(template.getMetadata().getLabels(), labels(a)));
    template.setMetadata(podMeta);
    PodSpec pod = ShallowCopy.of(template.getSpec());
    template.setSpec(pod);

    List<Container> containers = new ArrayList<>(pod.getContainers());
    Container c = ShallowCopy.of(containers.get(p.container));
    List<EnvVar> env = new ArrayList<>(p.env.size() + 6);
    env.addAll(p.env);
    env.add(new EnvVar("ONESHOT_API_URL", a.apiUrl(), null));
    env.add(
        new EnvVarBuilder()
            .withName("ONESHOT_TOKEN")
            .withNewValueFrom()
            .withNewSecretKeyRef(TOKEN_KEY, a.name(), false)
            .endValueFrom()
            .build());
    env.add(new EnvVar("ONESHOT_BUILD_ID", Long.toString(a.buildId()), null));
    env.add(new EnvVar("ONESHOT_ATTEMPT", Integer.toString(a.attempt()), null));
    // The runner's identity: the first acquire binds the attempt to this pod.
    env.add(POD_NAME);
    env.add(POD_UID);
    c.setEnv(env);
    if (a.pod() != null) {
      own(io.oneshot.api.Json.tree(a.pod()), podMeta, pod, c, labels(a));
    }
    containers.set(p.container, c);
    pod.setContainers(containers);
    return job;
  }

  /**
   * A build's own pod settings (input.pod, as its enqueue let them through its route's rules) on
   * copies of what they change: the provisionerd container's requests, limits and image, node
   * selector entries and tolerations added to the template's, labels and annotations added to the
   * pod's (oneshot's labels last: a build's never replace them), the service account. Nothing else
   * of the pod: its security context, volumes and environment stay the template's and oneshot's.
   */
  private static void own(
      com.fasterxml.jackson.databind.JsonNode own,
      ObjectMeta podMeta,
      PodSpec pod,
      Container c,
      Map<String, String> identity) {
    com.fasterxml.jackson.databind.JsonNode res = own.path("resources");
    if (res.isObject()) {
      io.fabric8.kubernetes.api.model.ResourceRequirements r =
          new io.fabric8.kubernetes.api.model.ResourceRequirements();
      io.fabric8.kubernetes.api.model.ResourceRequirements was = c.getResources();
      r.setRequests(quantities(was == null ? null : was.getRequests(), res.path("requests")));
      r.setLimits(quantities(was == null ? null : was.getLimits(), res.path("limits")));
      r.setClaims(was == null ? null : was.getClaims());
      c.setResources(r);
    }
    if (own.path("image").isTextual()) {
      c.setImage(own.path("image").asText());
    }
    if (own.path("nodeSelector").isObject()) {
      pod.setNodeSelector(merged(pod.getNodeSelector(), strings(own.path("nodeSelector"))));
    }
    if (own.path("tolerations").isArray()) {
      List<io.fabric8.kubernetes.api.model.Toleration> t =
          pod.getTolerations() == null ? new ArrayList<>() : new ArrayList<>(pod.getTolerations());
      for (com.fasterxml.jackson.databind.JsonNode n : own.path("tolerations")) {
        t.add(
            new io.fabric8.kubernetes.api.model.Toleration(
                n.path("effect").isTextual() ? n.path("effect").asText() : null,
                n.path("key").asText(),
                n.path("operator").isTextual() ? n.path("operator").asText() : null,
                n.path("tolerationSeconds").isNumber()
                    ? n.path("tolerationSeconds").asLong()
                    : null,
                n.path("value").isTextual() ? n.path("value").asText() : null));
      }
      pod.setTolerations(t);
    }
    if (own.path("labels").isObject()) {
      podMeta.setLabels(merged(merged(podMeta.getLabels(), strings(own.path("labels"))), identity));
    }
    if (own.path("annotations").isObject()) {
      podMeta.setAnnotations(merged(podMeta.getAnnotations(), strings(own.path("annotations"))));
    }
    if (own.path("serviceAccount").isTextual()) {
      pod.setServiceAccountName(own.path("serviceAccount").asText());
    }
  }

  private static Map<String, io.fabric8.kubernetes.api.model.Quantity> quantities(
      Map<String, io.fabric8.kubernetes.api.model.Quantity> template,
      com.fasterxml.jackson.databind.JsonNode own) {
    Map<String, io.fabric8.kubernetes.api.model.Quantity> out = new LinkedHashMap<>();
    if (template != null) {
      out.putAll(template);
    }
    own.properties()
        .forEach(
            e ->
                out.put(
                    e.getKey(),
                    new io.fabric8.kubernetes.api.model.Quantity(e.getValue().asText())));
    return out.isEmpty() ? null : out;
  }

  private static Map<String, String> strings(com.fasterxml.jackson.databind.JsonNode obj) {
    Map<String, String> out = new LinkedHashMap<>();
    obj.properties().forEach(e -> out.put(e.getKey(), e.getValue().asText()));
    return out;
  }

  private static final EnvVar POD_NAME = fieldRef("ONESHOT_POD_NAME", "metadata.name");
  private static final EnvVar POD_UID = fieldRef("ONESHOT_POD_UID", "metadata.uid");

  /**
   * A route's Job without an attempt: the template deep-copied once, with the route's namespace and
   * every safe default the template left unset; {@code container} is the provisionerd container's
   * index, {@code env} the template's environment of it without the variables oneshot sets.
   */
  private record Prepared(Job job, int container, List<EnvVar> env) {}

  private final Map<OneshotConfig.Route, Prepared> prepared = new ConcurrentHashMap<>();

  private Prepared prepare(OneshotConfig.Route route) {
    Job job = new JobBuilder(templates.get(route.template())).build();
    ObjectMeta meta = job.getMetadata() == null ? new ObjectMeta() : job.getMetadata();
    job.setMetadata(meta);
    meta.setNamespace(namespace(route));
    meta.setGenerateName(null);
    meta.setResourceVersion(null);
    meta.setUid(null);

    JobSpec spec = job.getSpec();
    spec.setBackoffLimit(0);
    if (spec.getActiveDeadlineSeconds() == null) {
      // From the Job's creation: the pod may take up to the launch timeout to start.
      spec.setActiveDeadlineSeconds(
          route.launchTimeout().plus(route.timeout()).plus(route.cancelGrace()).toSeconds()
              + DEADLINE_SLACK_SECONDS);
    }
    // Never a second pod while the first is terminating (a template may not say otherwise).
    spec.setPodReplacementPolicy("Failed");
    if (spec.getTtlSecondsAfterFinished() == null) {
      spec.setTtlSecondsAfterFinished(ttlSecondsAfterFinished);
    }
    if (spec.getPodFailurePolicy() == null) {
      spec.setPodFailurePolicy(
          new PodFailurePolicyBuilder()
              .addNewRule()
              .withAction("FailJob")
              .addNewOnPodCondition()
              .withType("DisruptionTarget")
              .withStatus("True")
              .endOnPodCondition()
              .endRule()
              .build());
    }

    PodTemplateSpec template = spec.getTemplate();
    if (template.getMetadata() == null) {
      template.setMetadata(new ObjectMeta());
    }
    PodSpec pod = template.getSpec();
    pod.setRestartPolicy("Never");
    if (pod.getTerminationGracePeriodSeconds() == null) {
      // SIGTERM is a drain: provisionerd finishes its build, and the kubelet kills it only at the
      // end of this grace; long enough for the route's longest build unless the route says less.
      pod.setTerminationGracePeriodSeconds(route.terminationGrace().toSeconds());
    }
    if (pod.getAutomountServiceAccountToken() == null) {
      pod.setAutomountServiceAccountToken(false);
    }
    PodSecurityContext psc =
        pod.getSecurityContext() == null ? new PodSecurityContext() : pod.getSecurityContext();
    pod.setSecurityContext(psc);
    if (psc.getRunAsNonRoot() == null) {
      psc.setRunAsNonRoot(true);
    }
    if (psc.getSeccompProfile() == null) {
      psc.setSeccompProfile(new SeccompProfile(null, "RuntimeDefault"));
    }

    int index = 0;
    while (!JobTemplates.CONTAINER.equals(pod.getContainers().get(index).getName())) {
      index++;
    }
    Container c = pod.getContainers().get(index);
    List<EnvVar> env = new ArrayList<>();
    if (c.getEnv() != null) {
      for (EnvVar e : c.getEnv()) {
        if (!SET_BY_ONESHOT.contains(e.getName())) {
          env.add(e);
        }
      }
    }
    if (empty(c.getCommand()) && empty(c.getArgs())) {
      c.setArgs(List.of("provisionerd"));
    }
    // The runner's proof: a token of the pod's service account for oneshot's audience, bound to
    // the pod (KubernetesLauncher.prove); the provisionerd container alone mounts it.
    List<Volume> volumes =
        pod.getVolumes() == null ? new ArrayList<>() : new ArrayList<>(pod.getVolumes());
    volumes.removeIf(v -> PROOF_VOLUME.equals(v.getName()));
    volumes.add(
        new VolumeBuilder()
            .withName(PROOF_VOLUME)
            .withNewProjected()
            .addNewSource()
            .withNewServiceAccountToken()
            .withAudience(AUDIENCE)
            .withExpirationSeconds(PROOF_SECONDS)
            .withPath("token")
            .endServiceAccountToken()
            .endSource()
            .endProjected()
            .build());
    pod.setVolumes(volumes);
    List<VolumeMount> mounts =
        c.getVolumeMounts() == null ? new ArrayList<>() : new ArrayList<>(c.getVolumeMounts());
    mounts.removeIf(m -> PROOF_VOLUME.equals(m.getName()) || PROOF_DIR.equals(m.getMountPath()));
    mounts.add(
        new VolumeMountBuilder()
            .withName(PROOF_VOLUME)
            .withMountPath(PROOF_DIR)
            .withReadOnly(true)
            .build());
    c.setVolumeMounts(mounts);
    env.add(new EnvVar("ONESHOT_RUNNER_PROOF_FILE", PROOF_DIR + "/token", null));
    SecurityContext sc =
        c.getSecurityContext() == null ? new SecurityContext() : c.getSecurityContext();
    c.setSecurityContext(sc);
    if (sc.getAllowPrivilegeEscalation() == null) {
      sc.setAllowPrivilegeEscalation(false);
    }
    if (sc.getCapabilities() == null) {
      sc.setCapabilities(new Capabilities(null, List.of("ALL")));
    }
    return new Prepared(job, index, List.copyOf(env));
  }

  /** The route's template's provisionerd container's requests and limits, as written. */
  java.util.Map<String, java.util.Map<String, String>> templateResources(
      OneshotConfig.Route route) {
    Container c =
        templates.get(route.template()).getSpec().getTemplate().getSpec().getContainers().stream()
            .filter(x -> JobTemplates.CONTAINER.equals(x.getName()))
            .findFirst()
            .orElseThrow();
    java.util.Map<String, java.util.Map<String, String>> out = new LinkedHashMap<>();
    if (c.getResources() != null) {
      if (c.getResources().getRequests() != null) {
        out.put("requests", amounts(c.getResources().getRequests()));
      }
      if (c.getResources().getLimits() != null) {
        out.put("limits", amounts(c.getResources().getLimits()));
      }
    }
    return out;
  }

  private static java.util.Map<String, String> amounts(
      java.util.Map<String, io.fabric8.kubernetes.api.model.Quantity> q) {
    java.util.Map<String, String> out = new java.util.TreeMap<>();
    q.forEach((k, v) -> out.put(k, v.getAmount() + (v.getFormat() == null ? "" : v.getFormat())));
    return out;
  }

  private static EnvVar fieldRef(String name, String path) {
    return new EnvVarBuilder()
        .withName(name)
        .withNewValueFrom()
        .withNewFieldRef()
        .withFieldPath(path)
        .endFieldRef()
        .endValueFrom()
        .build();
  }

  /**
   * The attempt's token Secret, owned by its Job once that exists (the Job's uid; null before):
   * then Kubernetes deletes the Secret with the Job.
   */
  Secret secret(Attempt a, String jobUid) {
    return secret(a, base64(a.token().value()), jobUid);
  }

  private Secret secret(Attempt a, String token, String jobUid) {
    return new SecretBuilder()
        .withNewMetadata()
        .withName(a.name())
        .withNamespace(namespace(a))
        .withLabels(labels(a))
        .withOwnerReferences(jobUid == null ? List.of() : List.of(ownedBy(a.name(), jobUid)))
        .endMetadata()
        .withType("Opaque")
        .addToData(TOKEN_KEY, token)
        .build();
  }

  private static String base64(String s) {
    return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
  }

  // The values a route's JSON templates are made with, and proved with (JsonTemplate): digits and
  // base64 need no escaping, and these occur in no template by chance (the proof would show it).
  private static final List<String> PROBES =
      List.of("7305284619172839", "2061938475", base64("probe-token-5c1e93f7"), "probe-uid-9d02a4");
  private static final List<String> PROOF =
      List.of("4242424242", "3", base64("proof-token-04d1"), "proof-uid-77e0");

  /** A route's Job and Secret as JSON templates; empty where the proof failed. */
  private record Json(String apiUrl, Optional<JsonTemplate> job, Optional<JsonTemplate> secret) {}

  private final Map<OneshotConfig.Route, Json> json = new ConcurrentHashMap<>();

  private Json json(Attempt a) {
    Json j = json.computeIfAbsent(a.route(), r -> json(r, a.apiUrl()));
    return j.apiUrl.equals(a.apiUrl()) ? j : json(a.route(), a.apiUrl());
  }

  private Json json(OneshotConfig.Route route, String apiUrl) {
    Function<List<String>, Attempt> attempt =
        v -> {
          long build = Long.parseLong(v.get(0));
          int n = Integer.parseInt(v.get(1));
          return new Attempt(build, n, Attempt.nameOf(build, n), route, null, apiUrl);
        };
    return new Json(
        apiUrl,
        JsonTemplate.of(v -> serialization.asJson(job(attempt.apply(v))), PROBES, PROOF),
        JsonTemplate.of(
            v -> serialization.asJson(secret(attempt.apply(v), v.get(2), v.get(3))),
            PROBES,
            PROOF));
  }

  /** Whether the attempt's Job and Secret JSON are filled in from templates (for tests). */
  boolean templated(Attempt a) {
    return json(a).job().isPresent() && json(a).secret().isPresent();
  }

  /**
   * The attempt's Job as the client would serialize {@link #job}: from the route's template, filled
   * in with the attempt's numbers.
   */
  String jobJson(Attempt a) {
    if (a.pod() != null) {
      // A build's own pod settings: its Job is made whole (the route's JSON templates are of its
      // route's pod alone).
      return serialization.asJson(job(a));
    }
    Optional<JsonTemplate> t = json(a).job();
    return t.isPresent()
        ? t.get().fill(List.of(Long.toString(a.buildId()), Integer.toString(a.attempt())))
        : serialization.asJson(job(a));
  }

  /**
   * The attempt's token Secret, owned by the Job of that uid, as the client would serialize {@link
   * #secret}.
   */
  String secretJson(Attempt a, String jobUid) {
    String token = base64(a.token().value());
    Optional<JsonTemplate> t = json(a).secret();
    return t.isPresent() && JsonTemplate.plain(jobUid)
        ? t.get()
            .fill(List.of(Long.toString(a.buildId()), Integer.toString(a.attempt()), token, jobUid))
        : serialization.asJson(secret(a, token, jobUid));
  }

  /** The owner reference that lets Kubernetes delete the Secret with its Job. */
  static OwnerReference ownedBy(Job job) {
    return ownedBy(job.getMetadata().getName(), job.getMetadata().getUid());
  }

  private static OwnerReference ownedBy(String jobName, String jobUid) {
    return new OwnerReferenceBuilder()
        .withApiVersion("batch/v1")
        .withKind("Job")
        .withName(jobName)
        .withUid(jobUid)
        .withBlockOwnerDeletion(false)
        .withController(false)
        .build();
  }

  private static Map<String, String> merged(Map<String, String> mine, Map<String, String> ours) {
    Map<String, String> out = new LinkedHashMap<>();
    if (mine != null) {
      out.putAll(mine);
    }
    out.putAll(ours);
    return out;
  }

  private static boolean empty(List<String> l) {
    return l == null || l.isEmpty();
  }
}
