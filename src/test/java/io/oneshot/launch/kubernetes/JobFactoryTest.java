package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.build.BuildToken;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.Attempt;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class JobFactoryTest {
  private static final KubernetesSerialization SER = new KubernetesSerialization();
  @TempDir Path dir;

  private JobFactory factory(OneshotConfig c) {
    return new JobFactory(JobTemplates.load(dir, c.routes(), SER), "builds", 600);
  }

  private OneshotConfig config(String routes) {
    return ConfigLoader.parse(
        "api: {publicUrl: \"http://oneshot.oneshot.svc:8080\"}\n"
            + "launcher: {kind: kubernetes}\n"
            + routes,
        "t",
        Map.of());
  }

  private static Map<String, EnvVar> env(Container c) {
    return c.getEnv().stream().collect(Collectors.toMap(EnvVar::getName, e -> e));
  }

  @Test
  void aShippedTemplateGetsItsIdentityTheTokenAndSafeDefaults() throws Exception {
    Files.copy(Path.of("job-templates/script.yaml"), dir.resolve("script.yaml"));
    OneshotConfig c =
        config(
            "routes: [{name: org-a, template: script.yaml, namespace: team-a, timeout: 10m, cancelGrace: 30s}]");
    BuildToken token = BuildToken.generate();
    Attempt a =
        new Attempt(
            42,
            3,
            Attempt.nameOf(42, 3),
            c.routes().get(0),
            token,
            "http://oneshot.oneshot.svc:8080");
    JobFactory f = factory(c);

    Job job = f.job(a);
    assertThat(job.getMetadata().getName()).isEqualTo("oneshot-42-3");
    assertThat(job.getMetadata().getNamespace()).isEqualTo("team-a");
    Map<String, String> identity =
        Map.of(
            "app.kubernetes.io/managed-by", "oneshot",
            "oneshot.io/build", "42",
            "oneshot.io/attempt", "3",
            "oneshot.io/route", "org-a");
    assertThat(job.getMetadata().getLabels())
        .containsAllEntriesOf(identity)
        .containsEntry("app.kubernetes.io/component", "script");
    assertThat(job.getSpec().getTemplate().getMetadata().getLabels())
        .containsAllEntriesOf(identity);
    assertThat(job.getSpec().getBackoffLimit()).isZero();
    // launch timeout (5m) + timeout (10m) + cancel grace (30s) + slack (60s)
    assertThat(job.getSpec().getActiveDeadlineSeconds()).isEqualTo(300 + 600 + 30 + 60);
    assertThat(job.getSpec().getPodReplacementPolicy()).isEqualTo("Failed");
    assertThat(job.getSpec().getTtlSecondsAfterFinished()).isEqualTo(600);
    assertThat(job.getSpec().getPodFailurePolicy().getRules().get(0).getAction())
        .isEqualTo("FailJob");
    assertThat(
            job.getSpec()
                .getPodFailurePolicy()
                .getRules()
                .get(0)
                .getOnPodConditions()
                .get(0)
                .getType())
        .isEqualTo("DisruptionTarget");
    PodSpec pod = job.getSpec().getTemplate().getSpec();
    assertThat(pod.getRestartPolicy()).isEqualTo("Never");
    assertThat(pod.getTerminationGracePeriodSeconds())
        .as("a drained build may finish: the route's timeout (10m), cancel grace (30s), and 30s")
        .isEqualTo(660L);
    assertThat(pod.getAutomountServiceAccountToken()).isFalse();
    assertThat(pod.getServiceAccountName()).isEqualTo("oneshot-build");
    assertThat(pod.getSecurityContext().getRunAsNonRoot()).isTrue();
    assertThat(pod.getSecurityContext().getSeccompProfile().getType()).isEqualTo("RuntimeDefault");
    Container p = pod.getContainers().get(0);
    Map<String, EnvVar> env = env(p);
    assertThat(env.get("ONESHOT_API_URL").getValue()).isEqualTo("http://oneshot.oneshot.svc:8080");
    assertThat(env.get("ONESHOT_TOKEN").getValue()).isNull();
    assertThat(env.get("ONESHOT_TOKEN").getValueFrom().getSecretKeyRef().getName())
        .isEqualTo("oneshot-42-3");
    assertThat(env.get("ONESHOT_TOKEN").getValueFrom().getSecretKeyRef().getKey())
        .isEqualTo("token");
    assertThat(env.get("ONESHOT_BUILD_ID").getValue()).isEqualTo("42");
    assertThat(env.get("ONESHOT_POD_NAME").getValueFrom().getFieldRef().getFieldPath())
        .isEqualTo("metadata.name");
    assertThat(env.get("ONESHOT_POD_UID").getValueFrom().getFieldRef().getFieldPath())
        .isEqualTo("metadata.uid");
    assertThat(env.get("ONESHOT_WORK_DIR").getValue()).as("the template's own").isEqualTo("/work");
    assertThat(p.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
    assertThat(p.getSecurityContext().getCapabilities().getDrop()).containsExactly("ALL");
    assertThat(job.toString()).doesNotContain(token.value());

    Secret s = f.secret(a, null);
    assertThat(s.getMetadata().getOwnerReferences()).as("no Job yet").isEmpty();
    s = f.secret(a, "uid-of-the-job");
    assertThat(s.getMetadata().getOwnerReferences())
        .singleElement()
        .satisfies(
            o -> {
              assertThat(o.getKind()).isEqualTo("Job");
              assertThat(o.getApiVersion()).isEqualTo("batch/v1");
              assertThat(o.getName()).isEqualTo("oneshot-42-3");
              assertThat(o.getUid()).isEqualTo("uid-of-the-job");
            });
    assertThat(s.getMetadata().getName()).isEqualTo("oneshot-42-3");
    assertThat(s.getMetadata().getNamespace()).isEqualTo("team-a");
    assertThat(s.getMetadata().getLabels()).containsAllEntriesOf(identity);
    assertThat(
            new String(
                Base64.getDecoder().decode(s.getData().get("token")), StandardCharsets.UTF_8))
        .isEqualTo(token.value());
  }

  @Test
  void theTemplatesOwnSettingsWinAndItsOneshotVariablesAreReplaced() throws Exception {
    Files.writeString(
        dir.resolve("mine.yaml"),
        """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: ignored, namespace: ignored, labels: {team: ops}}
        spec:
          activeDeadlineSeconds: 99
          ttlSecondsAfterFinished: 5
          template:
            spec:
              automountServiceAccountToken: true
              securityContext: {runAsNonRoot: false}
              nodeSelector: {gpu: "true"}
              containers:
                - name: provisionerd
                  image: mine
                  command: ["/bin/oneshot", "provisionerd"]
                  env:
                    - {name: ONESHOT_API_URL, value: "http://spoofed"}
                    - {name: CLOUD, value: "aws"}
        """);
    OneshotConfig c = config("routes: [{name: gpu, template: mine.yaml}]");
    Attempt a =
        new Attempt(
            7, 1, Attempt.nameOf(7, 1), c.routes().get(0), BuildToken.generate(), "http://api");
    Job job = factory(c).job(a);
    assertThat(job.getMetadata().getName()).isEqualTo("oneshot-7-1");
    assertThat(job.getMetadata().getNamespace()).isEqualTo("builds");
    assertThat(job.getMetadata().getLabels()).containsEntry("team", "ops");
    assertThat(job.getSpec().getActiveDeadlineSeconds()).isEqualTo(99);
    assertThat(job.getSpec().getTtlSecondsAfterFinished()).isEqualTo(5);
    PodSpec pod = job.getSpec().getTemplate().getSpec();
    assertThat(pod.getAutomountServiceAccountToken()).isTrue();
    assertThat(pod.getSecurityContext().getRunAsNonRoot()).isFalse();
    assertThat(pod.getNodeSelector()).containsEntry("gpu", "true");
    Container p = pod.getContainers().get(0);
    assertThat(p.getCommand()).containsExactly("/bin/oneshot", "provisionerd");
    assertThat(p.getArgs()).isEmpty();
    assertThat(env(p).get("ONESHOT_API_URL").getValue()).isEqualTo("http://api");
    assertThat(env(p).get("CLOUD").getValue()).isEqualTo("aws");
    assertThat(p.getEnv().stream().filter(e -> e.getName().equals("ONESHOT_API_URL"))).hasSize(1);
  }

  @Test
  void namesStayWithinKubernetesLimits() {
    String longest = Attempt.nameOf(Long.MAX_VALUE, 999);
    assertThat(longest).hasSizeLessThanOrEqualTo(63).matches("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  }

  @Test
  void eachAttemptGetsAJobOfItsOwnAndTheTemplateStaysAsItWasRead() throws Exception {
    Files.copy(Path.of("job-templates/terraform.yaml"), dir.resolve("terraform.yaml"));
    OneshotConfig c = config("routes: [{name: tf, template: terraform.yaml, namespace: team-a}]");
    JobTemplates templates = JobTemplates.load(dir, c.routes(), SER);
    String read = SER.asJson(templates.get("terraform.yaml"));
    JobFactory f = new JobFactory(templates, "builds", 600);
    Attempt first =
        new Attempt(
            7, 1, Attempt.nameOf(7, 1), c.routes().get(0), BuildToken.generate(), "http://x");
    Attempt second =
        new Attempt(
            8, 1, Attempt.nameOf(8, 1), c.routes().get(0), BuildToken.generate(), "http://x");

    Job a = f.job(first);
    String aAsMade = SER.asJson(a);
    Job b = f.job(second);

    assertThat(SER.asJson(templates.get("terraform.yaml"))).isEqualTo(read);
    assertThat(SER.asJson(a))
        .as("the second attempt's Job shares nothing with the first")
        .isEqualTo(aAsMade);
    assertThat(
            env(b.getSpec().getTemplate().getSpec().getContainers().get(0))
                .get("ONESHOT_BUILD_ID")
                .getValue())
        .isEqualTo("8");
    assertThat(b.getSpec().getTemplate().getMetadata().getLabels())
        .containsEntry("oneshot.io/build", "8");
  }

  /**
   * The JSON a launch sends is, to the character, what the client would serialize from the model:
   * for every attempt of every shipped template, and for a template whose own text holds one of the
   * values the JSON templates are made with (which then goes by the model).
   */
  @Test
  void theJsonSentIsWhatTheModelSerializesTo() throws Exception {
    for (String t : new String[] {"script.yaml", "terraform.yaml"}) {
      Files.copy(Path.of("job-templates", t), dir.resolve(t));
    }
    Files.writeString(
        dir.resolve("odd.yaml"),
        """
        apiVersion: batch/v1
        kind: Job
        metadata: {labels: {seed: "7305284619172839"}, annotations: {n: "2061938475"}}
        spec:
          template:
            spec:
              containers:
                - name: provisionerd
                  image: ghcr.io/oneshot/oneshot:1
                  env: [{name: SEED, value: "x7305284619172839x"}]
        """);
    OneshotConfig c =
        config(
            "routes: [{name: s, tags: {k: s}, template: script.yaml, namespace: team-a},"
                + " {name: tf, tags: {k: tf}, template: terraform.yaml},"
                + " {name: odd, tags: {k: odd}, template: odd.yaml}]");
    JobFactory f = factory(c);
    long[] builds = {1, 42, 7305284619172839L, 2061938475, Long.MAX_VALUE};
    int[] attempts = {1, 3, 2061938475, Integer.MAX_VALUE};
    for (OneshotConfig.Route r : c.routes()) {
      for (long b : builds) {
        for (int n : attempts) {
          Attempt a =
              new Attempt(
                  b, n, Attempt.nameOf(b, n), r, BuildToken.generate(), "http://api:8080/x?y=1");
          assertThat(f.templated(a)).as("from templates").isEqualTo(!r.name().equals("odd"));
          assertThat(f.jobJson(a)).as("%s %d %d", r.name(), b, n).isEqualTo(SER.asJson(f.job(a)));
          String uid = "0f6d1c2e-9a7b-4c1d-8e2f-" + n;
          assertThat(f.secretJson(a, uid)).isEqualTo(SER.asJson(f.secret(a, uid)));
          String odd = "a\"b";
          assertThat(f.secretJson(a, odd)).isEqualTo(SER.asJson(f.secret(a, odd)));
        }
      }
    }
    Job odd =
        SER.unmarshal(
            f.jobJson(
                new Attempt(
                    5, 1, Attempt.nameOf(5, 1), c.routes().get(2), BuildToken.generate(), "u")),
            Job.class);
    assertThat(odd.getMetadata().getLabels()).containsEntry("seed", "7305284619172839");
  }

  @Test
  void aJsonTemplateIsUsedOnlyOnceItsProofHolds() {
    java.util.function.Function<java.util.List<String>, String> doc =
        v -> "{\"a\":\"" + v.get(0) + "\",\"b\":[" + v.get(1) + "," + v.get(0) + "]}";
    JsonTemplate t =
        JsonTemplate.of(doc, java.util.List.of("P1", "P2"), java.util.List.of("x", "7"))
            .orElseThrow();
    assertThat(t.fill(java.util.List.of("q", "9")))
        .isEqualTo(doc.apply(java.util.List.of("q", "9")));
    // A document whose fixed text holds a probe: filled in, it would change that text too.
    java.util.function.Function<java.util.List<String>, String> fixed =
        v -> "{\"a\":\"" + v.get(0) + "\",\"c\":\"P1\"}";
    assertThat(JsonTemplate.of(fixed, java.util.List.of("P1"), java.util.List.of("x"))).isEmpty();
    assertThat(JsonTemplate.plain("0f6d-1c")).isTrue();
    assertThat(JsonTemplate.plain("a\"b")).isFalse();
    assertThat(JsonTemplate.plain("a\\b")).isFalse();
    assertThat(JsonTemplate.plain("a\nb")).isFalse();
  }

  @Test
  void theUidIsReadFromAnAnswerWithoutBuildingIt() {
    byte[] job =
        ("{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"spec\":{\"metadata\":{\"uid\":\"no\"}},"
                + "\"metadata\":{\"name\":\"x\",\"labels\":{\"uid\":\"no\"},\"uid\":\"the-uid\"}}")
            .getBytes(StandardCharsets.UTF_8);
    assertThat(KubernetesLauncher.metadataUid(job)).isEqualTo("the-uid");
    assertThat(KubernetesLauncher.metadataUid("{\"metadata\":{}}".getBytes(StandardCharsets.UTF_8)))
        .isNull();
  }

  /**
   * A route's {@code drainGrace} bounds the termination grace for operators who want less than the
   * route's timeout; it may not be shorter than the cancel grace and its margin.
   */
  @Test
  void aRoutesDrainGraceBoundsTheTerminationGrace() throws Exception {
    Files.copy(Path.of("job-templates/script.yaml"), dir.resolve("script.yaml"));
    OneshotConfig c =
        config(
            "routes: [{name: org-a, template: script.yaml, timeout: 2h, cancelGrace: 30s,"
                + " drainGrace: 5m}]");
    Attempt a =
        new Attempt(
            7, 1, Attempt.nameOf(7, 1), c.routes().get(0), BuildToken.generate(), "http://x:8080");
    assertThat(
            factory(c).job(a).getSpec().getTemplate().getSpec().getTerminationGracePeriodSeconds())
        .isEqualTo(300L);
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () ->
                config(
                    "routes: [{name: org-a, template: script.yaml, cancelGrace: 30s,"
                        + " drainGrace: 59s}]"))
        .hasMessageContaining("routes[0].drainGrace: must be at least 1m");
  }

  /**
   * A build's own pod settings reach its Job's pod and nothing else: the container's sizes and
   * image, node selector entries, tolerations, labels and annotations added to the template's,
   * oneshot's identity kept, the security context, volumes and token as the template and oneshot
   * make them; and the Job sent is the Job made (the route's JSON templates are not used for it).
   */
  @Test
  void aBuildsOwnPodSettingsReachItsPodAndNothingElse() throws Exception {
    Files.copy(Path.of("job-templates/script.yaml"), dir.resolve("script.yaml"));
    OneshotConfig c = config("routes: [{name: org-a, template: script.yaml, namespace: team-a}]");
    String own =
        """
        {"resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "2Gi", "cpu": "2"}},
         "image": "ghcr.io/acme/tools:1.4",
         "nodeSelector": {"pool": "gpu"},
         "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                         {"key": "spot", "value": "yes", "effect": "NoExecute", "tolerationSeconds": 30}],
         "labels": {"cost-center": "4711", "oneshot.io/build": "999"},
         "annotations": {"example.com/note": "hi"},
         "serviceAccount": "builder"}
        """;
    Attempt a =
        new Attempt(
            42,
            1,
            Attempt.nameOf(42, 1),
            c.routes().get(0),
            BuildToken.generate(),
            "http://oneshot.oneshot.svc:8080",
            own);
    JobFactory f = factory(c);
    Job job = f.job(a);
    PodSpec pod = job.getSpec().getTemplate().getSpec();
    Container p = pod.getContainers().get(0);
    assertThat(p.getImage()).isEqualTo("ghcr.io/acme/tools:1.4");
    assertThat(p.getResources().getRequests())
        .containsEntry("memory", new io.fabric8.kubernetes.api.model.Quantity("1Gi"))
        .as("the template's own request stays")
        .containsEntry("cpu", new io.fabric8.kubernetes.api.model.Quantity("100m"));
    assertThat(p.getResources().getLimits())
        .containsEntry("memory", new io.fabric8.kubernetes.api.model.Quantity("2Gi"))
        .containsEntry("cpu", new io.fabric8.kubernetes.api.model.Quantity("2"));
    assertThat(pod.getNodeSelector()).isEqualTo(Map.of("pool", "gpu"));
    assertThat(pod.getTolerations()).hasSize(2);
    assertThat(pod.getTolerations().get(1).getTolerationSeconds()).isEqualTo(30L);
    assertThat(pod.getTolerations().get(1).getValue()).isEqualTo("yes");
    assertThat(pod.getTolerations().get(0).getOperator()).isEqualTo("Exists");
    assertThat(job.getSpec().getTemplate().getMetadata().getLabels())
        .containsEntry("cost-center", "4711")
        .as("oneshot's identity is its own")
        .containsEntry("oneshot.io/build", "42");
    assertThat(job.getSpec().getTemplate().getMetadata().getAnnotations())
        .containsEntry("example.com/note", "hi");
    assertThat(pod.getServiceAccountName()).isEqualTo("builder");
    // What a build cannot change: the token stays unmounted, the security context, the volumes.
    assertThat(pod.getAutomountServiceAccountToken()).isFalse();
    assertThat(pod.getSecurityContext().getRunAsNonRoot()).isTrue();
    assertThat(p.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
    assertThat(pod.getVolumes())
        .extracting(v -> v.getName())
        .containsExactly("work", "tmp", "oneshot-runner-proof");
    // The route's prepared Job is untouched: the next attempt without settings has the template's.
    Job plain =
        f.job(
            new Attempt(
                43,
                1,
                Attempt.nameOf(43, 1),
                c.routes().get(0),
                BuildToken.generate(),
                "http://oneshot.oneshot.svc:8080"));
    PodSpec plainPod = plain.getSpec().getTemplate().getSpec();
    assertThat(plainPod.getContainers().get(0).getImage())
        .isEqualTo("ghcr.io/oneshot-dev/oneshot:0.1.0");
    assertThat(plainPod.getNodeSelector()).isNullOrEmpty();
    assertThat(plainPod.getTolerations()).isNullOrEmpty();
    assertThat(plainPod.getServiceAccountName()).isEqualTo("oneshot-build");
    assertThat(plainPod.getContainers().get(0).getResources().getLimits())
        .containsEntry("memory", new io.fabric8.kubernetes.api.model.Quantity("512Mi"));
    // The JSON sent is this Job.
    assertThat(SER.unmarshal(f.jobJson(a), Job.class)).isEqualTo(job);
  }
}
