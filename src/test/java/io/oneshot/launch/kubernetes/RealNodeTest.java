package io.oneshot.launch.kubernetes;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.client.Config;
import io.oneshot.testing.Ports;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.RealCluster;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Kubernetes launcher on a real node ({@code scripts/kube start}): a real API server, Job
 * controller, scheduler, kubelet, containerd and runc, where the mock API and the test kubelet only
 * agree with what oneshot assumes.
 */
class RealNodeTest {
  @TempDir Path tmp;
  private RealCluster k;
  private String ns;
  private TestServer t;
  private int port;

  @BeforeEach
  void setUp() {
    k = RealCluster.get();
    ns = k.namespace("real-node");
    port = Ports.stable();
  }

  @AfterEach
  void tearDown() {
    try {
      if (t != null) {
        t.close();
      }
    } finally {
      if (k != null && ns != null) {
        k.delete(ns);
      }
    }
  }

  private TestServer start(String routes, UnaryOperator<String> template) throws IOException {
    Path dir = k.templates(tmp.resolve("templates"), template);
    t =
        k.server(ns, dir, port, "ttlSecondsAfterFinished: 600")
            .dispatch(
                "maxConcurrent: 6, pollInterval: 200ms, rescueInterval: 300ms, heartbeatInterval: 300ms")
            .routes(routes)
            .start();
    return t;
  }

  private static final String ROUTES =
      """
      routes:
        - {name: scripts, tags: {team: a}, untagged: true, template: script.yaml, maxConcurrent: 4, maxAttempts: 2}
      """;

  private List<Job> jobsOf(long build) {
    return k.admin
        .batch()
        .v1()
        .jobs()
        .inNamespace(ns)
        .withLabel("oneshot.io/build", Long.toString(build))
        .list()
        .getItems();
  }

  private List<Pod> podsOf(long build) {
    return k.admin
        .pods()
        .inNamespace(ns)
        .withLabel("oneshot.io/build", Long.toString(build))
        .list()
        .getItems();
  }

  /**
   * {@code kubectl logs} of the build's Job, once the kubelet has said its container started: a
   * build can end (provisionerd reported to the API) before the kubelet's next status update leaves
   * "ContainerCreating", and until then kubectl refuses the logs (seen on a node just started).
   */
  private String logsOf(long id) {
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () ->
                podsOf(id).stream()
                    .flatMap(p -> p.getStatus().getContainerStatuses().stream())
                    .anyMatch(
                        c ->
                            c.getName().equals("provisionerd")
                                && (c.getState().getRunning() != null
                                    || c.getState().getTerminated() != null)));
    return k.kubectl("logs", "-n", ns, "job/oneshot-" + id + "-1");
  }

  private static String awaitEnd(long id) {
    await()
        .atMost(3, TimeUnit.MINUTES)
        .until(() -> List.of("succeeded", "failed", "canceled").contains(status(id)));
    return status(id);
  }

  @Test
  void eachBuildIsOneJobAndOnePodAndKubectlLogsShowsIt() throws IOException {
    start(ROUTES, UnaryOperator.identity());
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      ids.add(
          t.api.submitScript(
              "{\"team\": \"a\"}",
              // As terraform draws its boxes: in UTF-8, in a pod whose locale names no charset.
              "printf 'from-pod-"
                  + i
                  + " \\342\\224\\202 \\342\\234\\223\\n'; exit "
                  + (i == 2 ? 3 : 0)));
    }
    for (int i = 0; i < 3; i++) {
      long id = ids.get(i);
      assertThat(awaitEnd(id)).as("build %d", id).isEqualTo(i == 2 ? "failed" : "succeeded");
      assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
      assertThat(jobsOf(id)).as("one Job per build").hasSize(1);
      assertThat(podsOf(id)).as("one pod per build").hasSize(1);
      assertThat(logsOf(id)).contains("from-pod-" + i + " \u2502 \u2713");
    }
  }

  /** One raw HTTP call from a build's script (bash's /dev/tcp: the image has no curl). */
  private String rawCall(String label, String call, String body, String headers) {
    return ("exec 3<>/dev/tcp/127.0.0.1/%d; printf 'POST /api/v1/runner/%s HTTP/1.1\\r\\nHost:"
            + " oneshot\\r\\n%sContent-Type: application/json\\r\\nContent-Length:"
            + " %d\\r\\nConnection: close\\r\\n\\r\\n%s' >&3; echo \"%s %s $(tr -d '\\r' <&3 | sed -n '1p;$p' | tr"
            + " '\\n' ' ')\"; exec 3<&-\n")
        .formatted(port, call, headers, body.length(), body, label, call);
  }

  /**
   * A build's pod holding another build's token, with that build's pod named in its runner headers
   * and its own pod's proof: it is proven to be its own attempt's runner, and so takes nothing of
   * the other's; without a proof, nobody's. Each call is a 401 and a line on the other build, which
   * runs to its end, once, as its own runner decides.
   */
  @Test
  void aBuildsPodCannotActAsAnotherBuildsRunner() throws IOException {
    start(ROUTES, UnaryOperator.identity());
    String bSecret = "b-secret-" + Long.toHexString(System.nanoTime());
    long b =
        t.api
            .post(
                "/api/v1/builds",
                "{\"tags\": {\"team\": \"a\"}, \"input\": {\"provisioner\": \"script\","
                    + " \"command\": [\"sh\", \"-c\", \"echo b-started; sleep 20; echo"
                    + " b-finished\"], \"env\": {\"SECRET_B\": \""
                    + bSecret
                    + "\"}}}")
            .json()
            .path("id")
            .asLong();
    await().atMost(2, TimeUnit.MINUTES).until(() -> status(b).equals("running"));
    String bToken =
        new String(
            java.util.Base64.getDecoder()
                .decode(
                    k.admin
                        .secrets()
                        .inNamespace(ns)
                        .withName("oneshot-" + b + "-1")
                        .get()
                        .getData()
                        .get("token")),
            java.nio.charset.StandardCharsets.UTF_8);
    Pod bPod = podsOf(b).get(0);
    String forged =
        ("Authorization: Bearer %s\\r\\nOneshot-Runner-Id: forged-runner-1\\r\\n"
                + "Oneshot-Runner-Pod: %s\\r\\nOneshot-Runner-Pod-Uid: %s\\r\\n")
            .formatted(bToken, bPod.getMetadata().getName(), bPod.getMetadata().getUid());
    String withProof =
        forged
            + "Oneshot-Runner-Proof: '\"$(cat /var/run/secrets/oneshot.io/runner/token)\"'\\r\\n";
    // Its own pod's proof, for the test to try on the API server below.
    StringBuilder script =
        new StringBuilder("echo \"proof: $(cat /var/run/secrets/oneshot.io/runner/token)\"\n");
    // What a pod could find of another build's on the node: its processes' environment, an API
    // credential, the other build's token Secret as a file.
    script.append(
        "echo \"environs: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c"
            + " SECRET_B)\"\n");
    script.append("echo \"api-credential: $(ls /var/run/secrets/kubernetes.io 2>&1)\"\n");
    script.append(
        "echo \"secrets: $(grep -rl "
            + bToken
            + " / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | wc -l)\"\n");
    for (String[] c :
        List.of(
            new String[] {"acquire", "{}"},
            new String[] {"heartbeat", "{}"},
            new String[] {"logs", "{\"first\": 1, \"lines\": [{\"text\": \"forged\"}]}"},
            new String[] {"complete", "{\"outcome\": \"failed\"}"})) {
      script.append(rawCall("proven", c[0], c[1], withProof));
      script.append(rawCall("bare", c[0], c[1], forged));
    }
    long a =
        t.api
            .post(
                "/api/v1/builds",
                "{\"tags\": {\"team\": \"a\"}, \"input\": {\"provisioner\": \"script\","
                    + " \"command\": [\"bash\", \"-c\", "
                    + io.oneshot.api.Json.write(script.toString())
                    + "]}}")
            .json()
            .path("id")
            .asLong();
    assertThat(awaitEnd(a)).isEqualTo("succeeded");
    String aLog = String.join("\n", Sql.logLines(a, "stdout"));
    // Proven, as its own attempt's runner: not the token's. Bare: nobody.
    for (String call : List.of("acquire", "heartbeat", "logs", "complete")) {
      assertThat(aLog)
          .contains("proven " + call + " HTTP/1.1 401", "bare " + call + " HTTP/1.1 401");
    }
    assertThat(aLog)
        .doesNotContain(bSecret)
        .contains("environs: 0")
        .contains("api-credential: ls: cannot access '/var/run/secrets/kubernetes.io'")
        .contains("secrets: 0");
    // The proof is for oneshot's audience alone: the API server does not take it as a credential.
    String proof =
        Sql.logLines(a, "stdout").stream()
            .filter(l -> l.startsWith("proof: "))
            .findFirst()
            .orElseThrow()
            .substring("proof: ".length());
    assertThat(proof).isNotBlank();
    Config asPod = Config.fromKubeconfig(Files.readString(k.kubeconfig));
    asPod.setClientCertData(null);
    asPod.setClientKeyData(null);
    asPod.setClientCertFile(null);
    asPod.setClientKeyFile(null);
    asPod.setOauthToken(proof);
    try (io.fabric8.kubernetes.client.KubernetesClient c =
        new io.fabric8.kubernetes.client.KubernetesClientBuilder().withConfig(asPod).build()) {
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> c.pods().inNamespace(ns).list())
          .isInstanceOfSatisfying(
              io.fabric8.kubernetes.client.KubernetesClientException.class,
              e -> assertThat(e.getCode()).isEqualTo(401));
    }
    assertThat(awaitEnd(b)).isEqualTo("succeeded");
    assertThat(Sql.logLines(b, "stdout")).contains("b-finished").doesNotContain("forged");
    assertThat(podsOf(a)).as("the other build's pod is left alone").hasSize(1);
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id = ? AND reason LIKE 'a"
                    + " call with this attempt''s token was refused:%'",
                b))
        .isEqualTo(8);
  }

  private static String error(long id) {
    return (String) Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id);
  }

  /** The exit code the kubelet reported for the build's pod's provisionerd container. */
  private Integer exitCode(long id) {
    List<Pod> pods = podsOf(id);
    if (pods.size() != 1 || pods.get(0).getStatus().getContainerStatuses() == null) {
      return null;
    }
    for (var cs : pods.get(0).getStatus().getContainerStatuses()) {
      if (cs.getName().equals("provisionerd")
          && cs.getState() != null
          && cs.getState().getTerminated() != null) {
        return cs.getState().getTerminated().getExitCode();
      }
    }
    return null;
  }

  private String jobCondition(long id) {
    Job job = jobsOf(id).get(0);
    if (job.getStatus() == null || job.getStatus().getConditions() == null) {
      return null;
    }
    return job.getStatus().getConditions().stream()
        .filter(c -> "True".equals(c.getStatus()))
        .map(c -> c.getType())
        .findFirst()
        .orElse(null);
  }

  private String reason(long id) {
    return t.api.get("/api/v1/builds/" + id).json().path("reason").asText();
  }

  private double troubles(String route, String kind) {
    Double v =
        io.oneshot.testing.PromText.parse(t.server.metrics().scrape())
            .value("oneshot_attempt_troubles_total", "route", route, "reason", kind);
    return v == null ? 0 : v;
  }

  private static long logLines(long id, String like) {
    return Sql.count(
        "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text LIKE ?", id, like);
  }

  /**
   * {@code kubectl get jobs} tells the truth: a failed build's pod exits non-zero and its Job is
   * Failed (not retried), a canceled build's pod exits with a code of its own, a succeeded build's
   * Job is Complete.
   */
  @Test
  void aJobsStatusIsItsBuildsOutcome() throws IOException {
    start(ROUTES, UnaryOperator.identity());
    long ok = t.api.submitScript("{\"team\": \"a\"}", "echo fine");
    long failed = t.api.submitScript("{\"team\": \"a\"}", "echo broken; exit 3");
    long canceled =
        t.api.submitScript(
            "{\"team\": \"a\"}",
            "trap 'echo trapped; exit 9' TERM; echo waiting; sleep 300 & wait");
    await().atMost(2, TimeUnit.MINUTES).until(() -> logLines(canceled, "waiting") == 1);
    assertThat(t.api.post("/api/v1/builds/" + canceled + "/cancel", "").status()).isEqualTo(202);
    assertThat(awaitEnd(ok)).isEqualTo("succeeded");
    assertThat(awaitEnd(failed)).isEqualTo("failed");
    assertThat(awaitEnd(canceled)).isEqualTo("canceled");
    assertThat(logLines(canceled, "trapped")).isEqualTo(1);
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () -> exitCode(ok) != null && exitCode(failed) != null && exitCode(canceled) != null);
    assertThat(exitCode(ok)).isZero();
    assertThat(exitCode(failed)).isEqualTo(io.oneshot.provisionerd.Provisionerd.BUILD_FAILED);
    assertThat(exitCode(canceled)).isEqualTo(io.oneshot.provisionerd.Provisionerd.BUILD_CANCELED);
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> jobCondition(ok) != null && jobCondition(failed) != null);
    assertThat(jobCondition(ok)).isEqualTo("Complete");
    assertThat(jobCondition(failed)).isEqualTo("Failed");
    assertThat(podsOf(failed)).as("not retried by the Job controller").hasSize(1);
    String jobs =
        k.kubectl(
            "get",
            "jobs",
            "-n",
            ns,
            "-o",
            "custom-columns=NAME:.metadata.name,OK:.status.succeeded,FAILED:.status.failed",
            "--no-headers");
    assertThat(jobs)
        .containsPattern("oneshot-" + ok + "-1 +1 +<none>")
        .containsPattern("oneshot-" + failed + "-1 +<none> +1");
  }

  /**
   * A process of the build killed by the kernel for the container's memory limit: the build says
   * so, and the trouble is counted.
   */
  @Test
  void aChildKilledForMemoryIsTheBuildsReason() throws IOException {
    start(ROUTES, tpl -> tpl.replace("memory: 512Mi", "memory: 300Mi"));
    // tail keeps a line that never ends: all of /dev/zero, until the kernel kills it.
    long id =
        t.api.submitScript("{\"team\": \"a\"}", "echo hog; tail /dev/zero; echo after $?; exit 7");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(error(id)).contains("OOM").contains("300 MiB");
    assertThat(logLines(id, "after 137")).isEqualTo(1);
    await().atMost(30, TimeUnit.SECONDS).until(() -> troubles("scripts", "oom_killed") == 1);
  }

  /**
   * provisionerd itself killed by the kernel for memory: the kubelet's word that the container
   * ended is enough, the build fails at once with the reason, and its Job stays for kubectl logs.
   */
  @Test
  void provisionerdKilledForMemoryFailsTheBuildAtOnce() throws IOException {
    start(
        ROUTES.replace("maxAttempts: 2}", "maxAttempts: 2, lease: 60s, cancelGrace: 30s}"),
        tpl -> tpl.replace("memory: 512Mi", "memory: 300Mi"));
    // The kernel kills the process with the highest score, about its size: the JVM, once the
    // build's memory is spread over many processes each smaller than it (its score raised too).
    long id =
        t.api.submitScript(
            "{\"team\": \"a\"}",
            "for p in /proc/[0-9]*; do [ \"$(readlink $p/exe)\" = /opt/java/bin/java ] && echo 1000 >"
                + " $p/oom_score_adj; done; echo hog; for i in $(seq 1 40); do { head -c 10m"
                + " /dev/zero; sleep 120; } | tail & done; wait");
    // The kubelet's report of the container's end, or the build's end, whichever is seen first.
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(() -> exitCode(id) != null || !List.of("launching", "running").contains(status(id)));
    long killedAt = System.nanoTime();
    assertThat(awaitEnd(id)).isEqualTo("failed");
    long tookMs = (System.nanoTime() - killedAt) / 1_000_000;
    assertThat(tookMs)
        .as("ended on the kubelet's word, not after lease and grace (90 s)")
        .isLessThan(30_000);
    assertThat(error(id)).contains("OOMKilled");
    await().atMost(30, TimeUnit.SECONDS).until(() -> troubles("scripts", "oom_killed") == 1);
    assertThat(jobsOf(id)).as("kept for kubectl logs").hasSize(1);
    assertThat(logsOf(id)).contains("hog");
  }

  /**
   * A pod no node can take: the scheduler's reason is the build's wait reason at once, the pod is
   * left to wait (never deleted and made again), and at the launch timeout the build fails with
   * that reason.
   */
  @Test
  void aPodNoNodeCanTakeWaitsWithTheSchedulersReasonThenFails() throws IOException {
    start(
        ROUTES.replace("maxAttempts: 2}", "maxAttempts: 3, launchTimeout: 15s}"),
        tpl ->
            tpl.replace(
                "      hostNetwork: true\n",
                "      hostNetwork: true\n      nodeSelector: {oneshot.test/pool: none}\n"));
    long id = t.api.submitScript("{\"team\": \"a\"}", "echo never");
    await().atMost(30, TimeUnit.SECONDS).until(() -> reason(id).contains("node(s) didn't match"));
    assertThat(status(id)).isEqualTo("launching");
    assertThat(reason(id)).contains("cannot be scheduled").contains("0/1 nodes are available");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(error(id)).contains("0/1 nodes are available");
    assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id))
        .as("not launched again")
        .isEqualTo(1);
    assertThat(logLines(id, "%is being deleted while it runs%"))
        .as("a pod that never ran is not said to")
        .isZero();
    assertThat(troubles("scripts", "unschedulable")).isEqualTo(1);
    // Its Job was deleted: what builds show offers instead of kubectl names that, and why.
    await().atMost(30, TimeUnit.SECONDS).until(() -> jobsOf(id).isEmpty());
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                t.api
                    .get("/api/v1/builds/" + id)
                    .json()
                    .path("launch")
                    .path("removedWhy")
                    .asText()
                    .contains("0/1 nodes are available"));
  }

  /**
   * A ResourceQuota that refuses the build's pod: the Job controller says so only in an Event on
   * the Job (nothing in its status), and that is the build's wait reason at once; once the quota
   * allows it, the Job controller's next try makes the pod and the build runs, once.
   */
  @Test
  void aPodTheNamespacesQuotaRefusesIsTheWaitReasonUntilTheQuotaAllowsIt() throws IOException {
    io.fabric8.kubernetes.api.model.ResourceQuota quota =
        new io.fabric8.kubernetes.api.model.ResourceQuotaBuilder()
            .withNewMetadata()
            .withName("no-pods")
            .endMetadata()
            .withNewSpec()
            .addToHard("pods", new io.fabric8.kubernetes.api.model.Quantity("0"))
            .endSpec()
            .build();
    k.admin.resourceQuotas().inNamespace(ns).resource(quota).create();
    // Admission refuses everything with "status unknown" until the quota controller has counted.
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> {
              var q = k.admin.resourceQuotas().inNamespace(ns).withName("no-pods").get();
              return q.getStatus() != null && q.getStatus().getHard() != null;
            });
    start(ROUTES.replace("maxAttempts: 2}", "maxAttempts: 1, launchTimeout: 2m}"), tpl -> tpl);
    long id = t.api.submitScript("{\"team\": \"a\"}", "echo ran once");
    await().atMost(30, TimeUnit.SECONDS).until(() -> reason(id).contains("exceeded quota"));
    assertThat(status(id)).isEqualTo("launching");
    assertThat(reason(id))
        .startsWith("the Job controller cannot create the pod (a ResourceQuota of the namespace)")
        .contains("exceeded quota: no-pods")
        .contains("limited: pods=0");
    assertThat(podsOf(id)).isEmpty();
    assertThat(troubles("scripts", "quota")).isEqualTo(1);

    k.admin.resourceQuotas().inNamespace(ns).withName("no-pods").delete();
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    assertThat(logLines(id, "ran once")).isEqualTo(1);
    assertThat(logLines(id, "the Job controller cannot create the pod%"))
        .as("said once however often the Job controller tried")
        .isEqualTo(1);
  }

  /** An image the node cannot have: the kubelet's reason is the build's wait reason at once. */
  @Test
  void aMissingImageIsTheWaitReason() throws IOException {
    start(
        ROUTES.replace("maxAttempts: 2}", "maxAttempts: 1, launchTimeout: 15s}"),
        tpl -> tpl.replaceFirst("image: \\S+", "image: localhost/oneshot/none:missing"));
    long id = t.api.submitScript("{\"team\": \"a\"}", "echo never");
    await().atMost(30, TimeUnit.SECONDS).until(() -> reason(id).contains("ErrImageNeverPull"));
    assertThat(status(id)).isEqualTo("launching");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(error(id)).contains("ErrImageNeverPull");
    assertThat(troubles("scripts", "image_pull")).isEqualTo(1);
  }

  /**
   * A running build's pod deleted (what a drain or an eviction does): provisionerd gets SIGTERM,
   * says so, and the build runs to its own end, once.
   */
  @Test
  void aBuildWhosePodIsDeletedRunsToItsEnd() throws IOException {
    start(ROUTES, UnaryOperator.identity());
    long id =
        t.api.submitScript(
            "{\"team\": \"a\"}",
            "trap 'echo script got TERM' TERM; echo started; for i in 1 2 3 4 5 6; do sleep 1; done; echo finished");
    await().atMost(2, TimeUnit.MINUTES).until(() -> logLines(id, "started") == 1);
    k.kubectl("delete", "pod", "-n", ns, "-l", "oneshot.io/build=" + id, "--wait=false");
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    assertThat(logLines(id, "finished")).isEqualTo(1);
    assertThat(logLines(id, "script got TERM")).isZero();
    assertThat(logLines(id, "started")).as("run once").isEqualTo(1);
    assertThat(logLines(id, "%SIGTERM%")).isGreaterThanOrEqualTo(1);
  }

  /**
   * The chart installed on the real node (Helm asking the API server what it serves: 1.20 has
   * PodDisruptionBudget as policy/v1beta1 only): the dispatcher runs as the chart's service account
   * with the chart's Role and nothing more, and the chart's budget for build pods keeps {@code
   * kubectl drain} off a running build, which finishes as it would have.
   */
  @Test
  void theChartsAccountRunsBuildsAndItsBudgetHoldsADrain() throws Exception {
    k.delete(ns);
    ns = k.bareNamespace("chart");
    new com.marcnuri.helm.Helm(io.oneshot.testing.Chart.DIR)
        .install()
        .withName("oneshot")
        .withNamespace(ns)
        .withKubeConfig(k.kubeconfig)
        .set("replicaCount", 0)
        .call();
    var pdb =
        k.admin
            .genericKubernetesResources("policy/v1beta1", "PodDisruptionBudget")
            .inNamespace(ns)
            .withName("oneshot-builds")
            .get();
    assertThat(pdb).as("the build pods' budget, in the version 1.20 serves").isNotNull();
    Config account = k.configFor(ns, "oneshot");
    Path dir = k.templates(tmp.resolve("templates"), UnaryOperator.identity());
    // The route keeps a balloon, at the chart's PriorityClass for them.
    t =
        k.server(ns, dir, port, "balloonPriorityClass: oneshot-" + ns + "-balloon", account)
            .dispatch(
                "pollInterval: 200ms, rescueInterval: 300ms, heartbeatInterval: 300ms,"
                    + " warmInterval: 1s")
            .routes(ROUTES.replace("maxAttempts: 2}", "maxAttempts: 2, warm: {idle: 1}}"))
            .start();
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(
            () ->
                k
                    .admin
                    .pods()
                    .inNamespace(ns)
                    .withLabel("oneshot.io/balloons", "scripts")
                    .list()
                    .getItems()
                    .stream()
                    .anyMatch(p -> "Running".equals(p.getStatus().getPhase())));
    assertThat(
            k.admin
                .pods()
                .inNamespace(ns)
                .withLabel("oneshot.io/balloons", "scripts")
                .list()
                .getItems()
                .get(0)
                .getSpec()
                .getPriority())
        .as("the balloon's priority, the chart's class for them")
        .isEqualTo(-1);
    long id =
        t.api.submitScript(
            "{\"team\": \"a\"}",
            "echo started; for i in 1 2 3 4 5 6 7 8; do sleep 1; done; echo finished");
    await().atMost(2, TimeUnit.MINUTES).until(() -> logLines(id, "started") == 1);
    // The budget as the disruption controller has seen it (until then an eviction is refused
    // for want of a status, not by the budget's rule).
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () -> {
              var b =
                  k.admin
                      .genericKubernetesResources("policy/v1beta1", "PodDisruptionBudget")
                      .inNamespace(ns)
                      .withName("oneshot-builds")
                      .get();
              Object observed = b.get("status", "observedGeneration");
              return observed != null
                  && ((Number) observed).longValue() >= b.getMetadata().getGeneration();
            });
    // This build's pod alone, by its Job's uid: a pod of an earlier test's build of the same id,
    // its namespace still being deleted, would be evicted too and the drain wait for it instead.
    String jobUid = jobsOf(id).get(0).getMetadata().getUid();
    RealCluster.Result drain;
    try {
      drain =
          k.kubectlResult(
              "drain",
              "127.0.0.1",
              "--pod-selector=controller-uid=" + jobUid,
              "--delete-emptydir-data",
              "--ignore-daemonsets",
              "--timeout=4s");
    } finally {
      k.kubectl("uncordon", "127.0.0.1");
    }
    assertThat(drain.exit()).as(drain.out()).isNotZero();
    assertThat(drain.out()).contains("disruption budget");
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    assertThat(logLines(id, "finished")).isEqualTo(1);
    assertThat(logLines(id, "%SIGTERM%")).as("never evicted").isZero();
    // Every call the dispatcher made was one the chart's Role grants.
    String scrape = t.server.metrics().scrape();
    assertThat(scrape).contains("oneshot_kubernetes_requests_total").doesNotContain("code=\"403\"");
  }

  /**
   * A dispatcher killed (SIGKILL) in the middle of a burst on the real node, and started again as
   * its Deployment would: every build ends as its script decided, none ran twice (each printed its
   * line once), the route's limit held, and nothing is left running.
   */
  @Test
  void aDispatcherKilledMidBurstLosesNoBuildAndRunsNoneTwice() throws Exception {
    io.oneshot.testing.TestDatabase.url();
    Sql.reset();
    io.oneshot.testing.Limits.track();
    Path dir = k.templates(tmp.resolve("templates"), UnaryOperator.identity());
    Path config = tmp.resolve("oneshot.yaml");
    Files.writeString(
        config,
        """
        database: {url: "%s", poolSize: 4}
        api: {listen: "127.0.0.1:%d", publicUrl: "http://127.0.0.1:%d", adminToken: "%s"}
        dispatch: {maxConcurrent: 4, pollInterval: 500ms, rescueInterval: 500ms, heartbeatInterval: 500ms}
        launcher: {kind: kubernetes, kubernetes: {namespace: %s, templateDir: "%s"}}
        routes:
          - {name: scripts, untagged: true, template: script.yaml, maxConcurrent: 4, maxAttempts: 3}
        """
            .formatted(
                io.oneshot.testing.TestDatabase.url(),
                port,
                port,
                TestServer.ADMIN_TOKEN,
                ns,
                dir));
    io.oneshot.testing.DispatcherProcess d =
        new io.oneshot.testing.DispatcherProcess(
                "dispatcher",
                port,
                config,
                Files.createDirectories(tmp.resolve("logs")),
                java.util.Map.of("KUBECONFIG", k.kubeconfig.toString()))
            .start();
    try {
      // Its routes are in the database once it leads.
      await().atMost(1, TimeUnit.MINUTES).until(d::leads);
      int n = 12;
      List<Long> ids = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        ids.add(
            ((Number)
                    Sql.value(
                        "SELECT id FROM oneshot.enqueue('{}', jsonb_build_object('provisioner',"
                            + " 'script', 'command', jsonb_build_array('sh', '-c', ?::text)))",
                        "echo run-" + i + "; sleep 2; exit " + (i % 4 == 0 ? 3 : 0)))
                .longValue());
      }
      await()
          .atMost(2, TimeUnit.MINUTES)
          .until(
              () -> Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'running'") >= 2);
      d.kill();
      d.start();
      await()
          .atMost(4, TimeUnit.MINUTES)
          .until(
              () ->
                  Sql.count("SELECT count(*) FROM oneshot.builds WHERE finished_at IS NULL") == 0);
      for (int i = 0; i < n; i++) {
        long id = ids.get(i);
        assertThat(status(id)).as("build %d", id).isEqualTo(i % 4 == 0 ? "failed" : "succeeded");
        assertThat(logLines(id, "run-" + i)).as("build %d ran once", id).isEqualTo(1);
      }
      assertThat(io.oneshot.testing.Limits.maxConcurrency().get("route:scripts"))
          .isLessThanOrEqualTo(4);
      // Every Job of the burst ended: nothing of it runs on the node.
      await()
          .atMost(1, TimeUnit.MINUTES)
          .until(
              () ->
                  k.admin.batch().v1().jobs().inNamespace(ns).list().getItems().stream()
                      .allMatch(JobStatus::finished));
    } finally {
      d.kill();
      io.oneshot.testing.Limits.untrack();
    }
  }
}
