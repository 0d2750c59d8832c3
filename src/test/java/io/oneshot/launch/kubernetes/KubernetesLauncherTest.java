package io.oneshot.launch.kubernetes;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodStatusBuilder;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.oneshot.build.BuildToken;
import io.oneshot.build.Database;
import io.oneshot.build.QueueStore;
import io.oneshot.build.Runner;
import io.oneshot.launch.AttemptRef;
import io.oneshot.testing.Api;
import io.oneshot.testing.Audit;
import io.oneshot.testing.Heavy;
import io.oneshot.testing.Limits;
import io.oneshot.testing.Ports;
import io.oneshot.testing.PromText;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import io.oneshot.testing.TcpProxy;
import io.oneshot.testing.TerraformOnPath;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.FaultyDispatcher;
import io.oneshot.testing.k8s.MockCluster;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The Kubernetes launcher end to end, against fabric8's mock API server in CRUD mode and a fake
 * kubelet that runs each Job's provisionerd as a local process.
 */
@Heavy
class KubernetesLauncherTest {
  private static final String ROUTES =
      """
      routes:
        - {name: team-a, tags: {team: a}, untagged: true, template: script.yaml, namespace: team-a, maxConcurrent: 4, maxAttempts: 3, hangTimeout: 10s, cancelGrace: 5s}
        - {name: team-b, tags: {team: b}, template: script.yaml, namespace: team-b, maxConcurrent: 3, maxAttempts: 3}
      """;

  @TempDir Path tmp;
  private MockCluster cluster;
  private TestServer t;
  private int port;
  private TcpProxy proxy;

  @BeforeEach
  void cluster() throws IOException {
    cluster =
        new MockCluster(
            List.of("team-a", "team-b"), Files.createDirectories(tmp.resolve("kubelet")));
    // The server restarts on it in some tests: pods already running were told this address.
    port = Ports.stable();
  }

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
    if (proxy != null) {
      proxy.close();
    }
    cluster.close();
  }

  private TestServer.Builder server() {
    return TestServer.with()
        .api(
            "{listen: \"127.0.0.1:%d\", publicUrl: \"http://127.0.0.1:%d\", adminToken: \"%s\"}"
                .formatted(port, port, TestServer.ADMIN_TOKEN))
        .launcherYaml(
            "{kind: kubernetes, kubernetes: {namespace: team-a, templateDir: job-templates, qps: 200, burst: 400, ttlSecondsAfterFinished: 600}}")
        .dispatch(
            "maxConcurrent: 6, pollInterval: 200ms, rescueInterval: 300ms, heartbeatInterval: 300ms")
        .routes(ROUTES)
        .launchers((vertx, cfg) -> KubernetesLauncher.create(cfg, cluster.clientFor(vertx)));
  }

  private List<Job> jobsOf(long build) {
    return cluster
        .admin
        .batch()
        .v1()
        .jobs()
        .inAnyNamespace()
        .withLabel("oneshot.io/build", Long.toString(build))
        .list()
        .getItems();
  }

  private List<io.fabric8.kubernetes.api.model.Pod> podsOf(long build) {
    return cluster
        .admin
        .pods()
        .inAnyNamespace()
        .withLabel("oneshot.io/build", Long.toString(build))
        .list()
        .getItems();
  }

  /**
   * A template directory holding the repository's templates and {@code custom.yaml}: the script
   * template changed by {@code change}.
   */
  private String templates(java.util.function.UnaryOperator<String> change) throws IOException {
    Path dir = Files.createDirectories(tmp.resolve("templates"));
    for (String f : List.of("script.yaml", "terraform.yaml")) {
      Files.copy(Path.of("job-templates", f), dir.resolve(f));
    }
    Files.writeString(
        dir.resolve("custom.yaml"),
        change.apply(Files.readString(Path.of("job-templates/script.yaml"))));
    return dir.toString();
  }

  private String awaitEnd(long id) {
    // A build here ends in seconds; the bound is what a guard that breaks it waits (CI's time).
    try {
      await()
          .atMost(1, TimeUnit.MINUTES)
          .until(() -> List.of("succeeded", "failed", "canceled").contains(status(id)));
    } catch (org.awaitility.core.ConditionTimeoutException e) {
      throw new AssertionError("build " + id + " did not end within a minute: " + where(id), e);
    }
    return status(id);
  }

  /** A build's row and its log: what a build that did not end was doing. */
  private static String where(long id) {
    return Sql.rows("SELECT status, attempt, reason, error FROM oneshot.builds WHERE id = ?", id)
        + "; its log: "
        + Sql.rows(
            "SELECT stage, text FROM oneshot.build_logs WHERE build_id = ? ORDER BY seq", id);
  }

  private static String error(long id) {
    return (String) Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id);
  }

  @Test
  @Tag("slow")
  void aHundredBuildsAcrossTwoRoutesRunAsJobs() {
    t = server().start();
    Limits.track();
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 100; i++) {
      String team = i % 2 == 0 ? "a" : "b";
      ids.add(
          t.api.submitScript(
              "{\"team\": \"" + team + "\"}",
              "echo from-pod-" + i + "; exit " + (i % 10 == 0 ? 4 : 0)));
    }
    // A minute alone here; each pod is a provisionerd JVM, and in CI two cores are shared with
    // the other test JVM and a real cluster: the bound is generous, and what did not end is named.
    try {
      await()
          .atMost(8, TimeUnit.MINUTES)
          .until(
              () ->
                  Sql.count("SELECT count(*) FROM oneshot.builds WHERE finished_at IS NULL") == 0);
    } catch (org.awaitility.core.ConditionTimeoutException e) {
      StringBuilder open = new StringBuilder();
      for (var row : Sql.rows("SELECT id FROM oneshot.builds WHERE finished_at IS NULL")) {
        long id = ((Number) row.get("id")).longValue();
        open.append("\n  build ").append(id).append(": ").append(where(id));
      }
      throw new AssertionError("builds not ended within 8 minutes:" + open, e);
    }
    for (int i = 0; i < 100; i++) {
      long id = ids.get(i);
      assertThat(status(id)).as("build %d", id).isEqualTo(i % 10 == 0 ? "failed" : "succeeded");
      assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
      assertThat(jobsOf(id)).as("one Job per build").hasSize(1);
      assertThat(
              Sql.count(
                  "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text = ?",
                  id,
                  "from-pod-" + i))
          .isEqualTo(1);
    }
    Map<String, Integer> max = Limits.maxConcurrency();
    assertThat(max.get("global")).isLessThanOrEqualTo(6);
    assertThat(max.get("route:team-a")).isLessThanOrEqualTo(4);
    assertThat(max.get("route:team-b")).isLessThanOrEqualTo(3);

    // The Job and Secret of one build, as the API server holds them.
    long id = ids.get(1);
    Job job = jobsOf(id).get(0);
    assertThat(job.getMetadata().getName()).isEqualTo("oneshot-" + id + "-1");
    assertThat(job.getMetadata().getNamespace()).isEqualTo("team-b");
    assertThat(job.getMetadata().getLabels())
        .containsEntry("oneshot.io/build", Long.toString(id))
        .containsEntry("oneshot.io/attempt", "1")
        .containsEntry("oneshot.io/route", "team-b")
        .containsEntry("app.kubernetes.io/managed-by", "oneshot");
    assertThat(job.getSpec().getBackoffLimit()).isZero();
    assertThat(job.getSpec().getTtlSecondsAfterFinished()).isEqualTo(600);
    assertThat(job.getSpec().getTemplate().getSpec().getRestartPolicy()).isEqualTo("Never");
    assertThat(job.getSpec().getTemplate().getSpec().getAutomountServiceAccountToken()).isFalse();
    Secret secret =
        cluster.admin.secrets().inNamespace("team-b").withName(job.getMetadata().getName()).get();
    assertThat(secret.getMetadata().getOwnerReferences())
        .singleElement()
        .satisfies(
            o -> {
              assertThat(o.getKind()).isEqualTo("Job");
              assertThat(o.getUid()).isEqualTo(job.getMetadata().getUid());
            });
    // kubectl logs job/<name> shows the build, because provisionerd echoes its log to stdout.
    assertThat(cluster.kubelet.podLog("team-b", job.getMetadata().getName()))
        .contains("from-pod-1");
    // builds show names the Job, the pod and the kubectl command.
    JsonNode b = t.api.get("/api/v1/builds/" + id).json();
    assertThat(b.path("launch").path("kind").asText()).isEqualTo("kubernetes");
    assertThat(b.path("launch").path("namespace").asText()).isEqualTo("team-b");
    assertThat(b.path("launch").path("pod").asText()).startsWith("oneshot-" + id + "-1-");
    assertThat(buildsShow(id))
        .contains("Job team-b/oneshot-" + id + "-1, pod oneshot-" + id + "-1-")
        .contains("kubectl logs -n team-b job/oneshot-" + id + "-1");
    List<String> steps = new ArrayList<>();
    b.path("events").forEach(e -> steps.add(e.path("reason").asText()));
    assertThat(steps)
        .anyMatch(s -> s.startsWith("launched Job team-b/oneshot-" + id + "-1 created"))
        .anyMatch(
            s ->
                s.startsWith("pod oneshot-" + id + "-1-")
                    && s.endsWith("scheduled on node fake-node-1"))
        .anyMatch(s -> s.startsWith("container provisionerd started in pod"));
  }

  private Secret secret(String name) {
    return cluster.admin.secrets().inNamespace("team-a").withName(name).get();
  }

  /** A build that waits for a file, so that tests can hold it running. */
  private long gated(String team, Path gate) {
    return t.api.submitScript(
        "{\"team\": \"" + team + "\"}",
        "echo waiting; while [ ! -e " + gate + " ]; do sleep 0.1; done; echo done");
  }

  private static long enqueueTrue(StoreFixture f) {
    return Database.await(
            f.store
                .queue()
                .enqueue(
                    "{\"team\": \"a\"}",
                    "{\"provisioner\": \"script\", \"command\": [\"true\"]}",
                    0,
                    null))
        .id();
  }

  @Test
  void aRestartedDispatcherAdoptsRemovesOrphansAndCreatesMissingJobs() throws Exception {
    Path gate = tmp.resolve("gate");
    t = server().start();
    long a = gated("a", gate);
    long b = gated("b", gate);
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(() -> status(a).equals("running") && status(b).equals("running"));
    t.close();
    t = null;

    // While no dispatcher runs: an orphan Job appears, and a build is claimed whose Job never is.
    Job orphan =
        cluster
            .admin
            .batch()
            .v1()
            .jobs()
            .inNamespace("team-a")
            .withName(jobsOf(a).get(0).getMetadata().getName())
            .get();
    orphan.getMetadata().setName("oneshot-999999-1");
    orphan.getMetadata().setUid(null);
    orphan.getMetadata().setResourceVersion(null);
    orphan.getMetadata().getLabels().put("oneshot.io/build", "999999");
    orphan.getSpec().getTemplate().getMetadata().getLabels().put("oneshot.io/build", "999999");
    orphan.setStatus(null);
    cluster.kubelet.hold("oneshot-999999-1");
    cluster.admin.batch().v1().jobs().inNamespace("team-a").resource(orphan).create();
    long claimed;
    long jobOnly;
    try (StoreFixture f = new StoreFixture(ROUTES, false)) {
      claimed = enqueueTrue(f);
      jobOnly = enqueueTrue(f);
      List<QueueStore.Claimed> c =
          Database.await(
              f.store
                  .queue()
                  .claim(10, "kubernetes", List.of(BuildToken.generate(), BuildToken.generate())));
      assertThat(c).extracting(QueueStore.Claimed::id).containsExactly(claimed, jobOnly);
    }
    assertThat(jobsOf(claimed)).isEmpty();
    // A Job made by a dispatcher that stopped before its Secret: its pod waits for the Secret (the
    // kubelet tries again), which the restarted dispatcher makes by launching the attempt again.
    int configErrors = cluster.kubelet.configErrors.get();
    Job withoutSecret =
        LaunchObjects.forBuilds(
                server().config(tmp), Path.of("job-templates"), "team-a", jobOnly, 1)
            .get(0)
            .job();
    String jobOnlyUid =
        cluster
            .admin
            .batch()
            .v1()
            .jobs()
            .inNamespace("team-a")
            .resource(withoutSecret)
            .create()
            .getMetadata()
            .getUid();
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> cluster.kubelet.configErrors.get() > configErrors);
    // Token Secrets whose Jobs never came (a dispatcher stopped between its two creates): one of
    // the claimed build, which its launch takes over, and one of a build that no longer exists.
    for (long build : List.of(claimed, 999_998L)) {
      cluster
          .admin
          .secrets()
          .inNamespace("team-a")
          .resource(
              new io.fabric8.kubernetes.api.model.SecretBuilder()
                  .withNewMetadata()
                  .withName("oneshot-" + build + "-1")
                  .addToLabels("oneshot.io/build", Long.toString(build))
                  .addToLabels("oneshot.io/attempt", "1")
                  .endMetadata()
                  .addToStringData("token", "left-over")
                  .build())
          .create();
    }

    t = server().keepQueue().start();
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () ->
                cluster
                        .admin
                        .batch()
                        .v1()
                        .jobs()
                        .inNamespace("team-a")
                        .withName("oneshot-999999-1")
                        .get()
                    == null);
    // The rescuer's first pass launches the Job found without its Secret again, which makes the
    // Secret: awaited here, within seconds, rather than through the build's end, which a Job
    // adopted as it is would reach only at its launch timeout.
    await().atMost(20, TimeUnit.SECONDS).until(() -> secret("oneshot-" + jobOnly + "-1") != null);
    assertThat(awaitEnd(claimed)).isEqualTo("succeeded");
    assertThat(jobsOf(claimed)).hasSize(1);
    assertThat(awaitEnd(jobOnly)).isEqualTo("succeeded");
    assertThat(jobsOf(jobOnly))
        .extracting(j -> j.getMetadata().getUid())
        .containsExactly(jobOnlyUid);
    assertThat(secret("oneshot-" + jobOnly + "-1").getMetadata().getOwnerReferences())
        .extracting(o -> o.getUid())
        .containsExactly(jobOnlyUid);
    // The Secrets are listed on the rescuer's first pass after the start (KubernetesLauncher
    // .SECRET_SWEEP), so this one is gone in seconds; the bound is what the guard secret-sweep
    // waits.
    await().atMost(20, TimeUnit.SECONDS).until(() -> secret("oneshot-999998-1") == null);
    assertThat(secret("oneshot-" + claimed + "-1").getMetadata().getOwnerReferences())
        .extracting(o -> o.getUid())
        .containsExactly(jobsOf(claimed).get(0).getMetadata().getUid());
    Files.writeString(gate, "open");
    assertThat(awaitEnd(a)).isEqualTo("succeeded");
    assertThat(awaitEnd(b)).isEqualTo("succeeded");
    for (long id : List.of(a, b, claimed, jobOnly)) {
      assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
      assertThat(jobsOf(id)).hasSize(1);
    }
  }

  /**
   * API Priority and Fairness turns the Job's create away (429, a Retry-After header, a plain-text
   * body): the launch waits as long as the header asks, says so in the build's reason, and then
   * makes the build's one Job.
   */
  @Test
  void aLaunchTurnedAwayByPriorityAndFairnessWaitsAsTheServerAsks() {
    cluster.dispatcher.add(
        FaultyDispatcher.turnedAwayByPriorityAndFairness(
            "POST", "^/apis/batch/v1/namespaces/team-a/jobs$", 3));
    t = server().start();
    long id = t.api.submitScript("{\"team\": \"a\"}", "echo ok");
    String waiting =
        await()
            .atMost(30, TimeUnit.SECONDS)
            .until(
                () -> (String) Sql.value("SELECT reason FROM oneshot.builds WHERE id = ?", id),
                r -> r != null && r.startsWith("throttled"));
    assertThat(waiting)
        .isEqualTo(
            "throttled by the Kubernetes API: Too many requests, please try again later.; try 2"
                + " in 3s");
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    assertThat(jobsOf(id)).hasSize(1);
  }

  @Test
  void apiFailuresLoseNoBuildAndNeverMakeTwoJobs() {
    String jobs = "^/apis/batch/v1/namespaces/team-a/jobs$";
    cluster.dispatcher.add(
        FaultyDispatcher.error("POST", jobs, 500, "InternalError", "etcd is having a moment"));
    cluster.dispatcher.add(FaultyDispatcher.throttle("POST", jobs, 1));
    cluster.dispatcher.add(FaultyDispatcher.doneButLost("POST", jobs, Duration.ofSeconds(20)));
    cluster.dispatcher.add(
        FaultyDispatcher.error(
            "POST", jobs, 403, "Forbidden", "exceeded quota: builds, requested: pods=1"));
    t = server().start();
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      ids.add(t.api.submitScript("{\"team\": \"a\"}", "echo ok"));
    }
    for (long id : ids) {
      assertThat(awaitEnd(id)).isEqualTo("succeeded");
      assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
      assertThat(jobsOf(id)).hasSize(1);
    }
    assertThat(cluster.kubelet.jobsSeen).hasSize(6).doesNotHaveDuplicates();
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_logs WHERE text LIKE '%will be retried%'"))
        .isGreaterThanOrEqualTo(3);
  }

  /**
   * A tenth of the dispatcher's calls to the API server fail at random (500, 503, 429, or done with
   * the answer lost): every build still runs once, through exactly one Job.
   */
  @Test
  @Tag("slow")
  void underRandomApiFaultsEveryBuildRunsOnceThroughOneJob() {
    cluster.dispatcher.chaos(0.1, io.oneshot.testing.k8s.MockCluster.DISPATCHER_AGENT);
    // A launch's try makes several calls, so about a third of tries meet a fault and a build's
    // tries can fail five or six times running: with the default backoff (doubling up to 30 s)
    // such a build waits a minute or more. A short one keeps the test on the invariant.
    t =
        server()
            .dispatch(
                "maxConcurrent: 6, pollInterval: 200ms, rescueInterval: 300ms,"
                    + " heartbeatInterval: 300ms, launchRetry: {initial: 200ms, max: 1s}")
            .start();
    Limits.track();
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      ids.add(t.api.submitScript("{\"team\": \"" + (i % 2 == 0 ? "a" : "b") + "\"}", "echo ok"));
    }
    for (long id : ids) {
      assertThat(awaitEnd(id)).as("build " + id).isEqualTo("succeeded");
      assertThat(jobsOf(id)).as("build " + id).hasSize(1);
    }
    assertThat(cluster.kubelet.jobsSeen).hasSize(20).doesNotHaveDuplicates();
    assertThat(cluster.dispatcher.chaosAnswers.get()).isPositive();
    assertThat(Limits.maxConcurrency().get("global")).isLessThanOrEqualTo(6);
  }

  @Test
  void aJobTheApiRefusesFailsTheBuildWithItsMessage() {
    cluster.dispatcher.add(
        FaultyDispatcher.error(
            "POST",
            "^/apis/batch/v1/namespaces/team-b/jobs$",
            422,
            "Invalid",
            "Job.batch \\\"x\\\" is invalid: spec.template.spec.containers[0].image: Required value"));
    t = server().start();
    long id = t.api.submitScript("{\"team\": \"b\"}", "true");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(error(id))
        .isEqualTo(
            "launch rejected: the Kubernetes API refused Job team-b/oneshot-"
                + id
                + "-1: Job.batch \"x\" is invalid: spec.template.spec.containers[0].image: Required value");
  }

  /**
   * Refusals that cannot pass fail the build at once, with the API's message: a namespace that does
   * not exist (404). (A Role without a verb is the operator's to fix, and the build waits:
   * ClustersTest.)
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          namespace       | jobs    | 404 | NotFound  | namespaces team-b not found | launch rejected: the Kubernetes API has no namespace for Job team-b/oneshot-ID-1: namespaces team-b not found
          invalid Secret  | secrets | 422 | Invalid   | Secret x is invalid: data: Too long | launch rejected: the Kubernetes API refused Job team-b/oneshot-ID-1: Secret x is invalid: data: Too long
          """)
  void aRefusalThatCannotPassFailsTheBuildAtOnce(
      String name, String resource, int code, String reason, String message, String error) {
    String path =
        resource.equals("jobs")
            ? "^/apis/batch/v1/namespaces/team-b/jobs$"
            : "^/api/v1/namespaces/team-b/secrets$";
    cluster.dispatcher.add(FaultyDispatcher.error("POST", path, code, reason, message));
    // The build's status when its Job's first DELETE arrives: the rescuer also removes the Job of
    // a failed build, but only after it failed.
    List<String> statusAtDelete = new java.util.concurrent.CopyOnWriteArrayList<>();
    cluster.dispatcher.add(
        new FaultyDispatcher.Fault(
            "DELETE",
            java.util.regex.Pattern.compile("^/apis/batch/v1/namespaces/team-b/jobs/oneshot-"),
            (request, crud) -> {
              long build = Long.parseLong(request.getPath().split("/")[7].split("-")[1]);
              statusAtDelete.add(
                  (String) Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", build));
              return crud.dispatch(request);
            }));
    t = server().start();
    long id = t.api.submitScript("{\"team\": \"b\"}", "true");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(error(id)).isEqualTo(error.replace("ID", Long.toString(id)));
    assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
    // A Job made before its Secret was refused is deleted by the launch, before the build fails:
    // its pod could never start.
    assertThat(jobsOf(id)).isEmpty();
    assertThat(statusAtDelete)
        .isEqualTo(resource.equals("jobs") ? List.of() : List.of("launching"));
    assertThat(
            cluster
                .admin
                .secrets()
                .inAnyNamespace()
                .withLabel("oneshot.io/build", Long.toString(id))
                .list()
                .getItems())
        .isEmpty();
  }

  /**
   * An API server that cannot be reached keeps launches waiting, each saying why and when it is
   * tried next, until its launch timeout, attempt after attempt, then fails the build; /readyz and
   * a gauge say so meanwhile. Once it answers again, builds launch.
   */
  @Test
  void anUnreachableApiIsWaitedForUntilTheLaunchTimeoutThenFailsTheBuild() {
    proxy = new TcpProxy(List.of(cluster.address()));
    t =
        server()
            .routes(
                "routes: [{name: team-a, tags: {team: a}, template: script.yaml, namespace: team-a,"
                    + " launchTimeout: 3s, maxAttempts: 2}]")
            .launchers(
                (vertx, cfg) -> KubernetesLauncher.create(cfg, cluster.clientThrough(vertx, proxy)))
            .start();
    proxy.cut();
    long id = t.api.submitScript("{\"team\": \"a\"}", "true");
    String api = "cannot reach the Kubernetes API at http://127.0.0.1:" + proxy.port() + "/: ";
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> reason(id).startsWith(api) && reason(id).matches(".*; try [0-9]+ in .*"));
    JsonNode ready = t.api.get("/readyz").json();
    assertThat(ready.path("kubernetes").path("reachable").asBoolean()).isFalse();
    assertThat(ready.path("kubernetes").path("detail").asText()).startsWith(api);
    assertThat(PromText.parse(t.api.get("/metrics").text()).value("oneshot_kubernetes_reachable"))
        .isEqualTo(0.0);

    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(error(id))
        .startsWith("not launched within the launch timeout of 3s (")
        .contains(api)
        .endsWith("(attempt 2 of 2)");

    proxy.restore();
    long next = t.api.submitScript("{\"team\": \"a\"}", "echo ok");
    assertThat(awaitEnd(next)).isEqualTo("succeeded");
    assertThat(t.api.get("/readyz").json().path("kubernetes").path("reachable").asBoolean())
        .isTrue();
    assertThat(PromText.parse(t.api.get("/metrics").text()).value("oneshot_kubernetes_reachable"))
        .isEqualTo(1.0);
    assertThat(jobsOf(id)).isEmpty();
  }

  private static String reason(long id) {
    return (String) Sql.value("SELECT reason FROM oneshot.builds WHERE id = ?", id);
  }

  @Test
  void anEvictedPodBeforeAcquireIsRequeuedAsAttemptTwo() {
    t = server().start();
    cluster.kubelet.hold("oneshot-1-1");
    long id = t.api.submitScript("{\"team\": \"a\"}", "echo second try");
    assertThat(id).isEqualTo(1);
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text LIKE '%cannot be scheduled yet: Unschedulable: 0/3 nodes%'",
                        id)
                    == 1);
    assertThat(status(id)).isEqualTo("launching");
    cluster.kubelet.evict("team-a", "oneshot-1-1");
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(2);
    assertThat(jobsOf(id)).extracting(j -> j.getMetadata().getName()).contains("oneshot-1-2");
    assertThat(
            (String)
                Sql.value(
                    "SELECT reason FROM oneshot.build_events WHERE build_id = ? AND from_status = 'launching' AND to_status = 'pending'",
                    id))
        .contains("Job team-a/oneshot-1-1 failed: PodFailurePolicy");
    // What the kubelet said of the pod reaches the log, whichever watch event came first.
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ?"
                            + " AND attempt = 1 AND text LIKE 'pod oneshot-1-1-% was evicted: %'",
                        id)
                    == 1);
    // Counted once per attempt and kind, for the operator's dashboard.
    await().atMost(10, TimeUnit.SECONDS).until(() -> troubles("team-a", "evicted") == 1);
    assertThat(troubles("team-a", "unschedulable")).isEqualTo(1);
  }

  private double troubles(String route, String reason) {
    Double v =
        PromText.parse(t.server.metrics().scrape())
            .value("oneshot_attempt_troubles_total", "route", route, "reason", reason);
    return v == null ? 0 : v;
  }

  @Test
  @Tag("slow")
  void aPodThatFailsAfterAcquireFailsTheBuildWithThePodsReason() {
    Path gate = tmp.resolve("never");
    t = server().start();
    long id = gated("a", gate);
    await().atMost(1, TimeUnit.MINUTES).until(() -> status(id).equals("running"));
    cluster.kubelet.oomKill("team-a", "oneshot-" + id + "-1");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(error(id))
        .startsWith(
            "provisionerd ended without reporting an outcome: Job team-a/oneshot-"
                + id
                + "-1 failed: BackoffLimitExceeded")
        .contains("container provisionerd OOMKilled (exit code 137)");
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text LIKE 'container provisionerd was OOMKilled%'",
                id))
        .isEqualTo(1);
    await().atMost(10, TimeUnit.SECONDS).until(() -> troubles("team-a", "oom_killed") == 1);
  }

  @Test
  void cancelDeletesTheJob() {
    Path gate = tmp.resolve("never");
    t = server().start();
    long running = gated("a", gate);
    await().atMost(1, TimeUnit.MINUTES).until(() -> status(running).equals("running"));
    cluster.kubelet.hold("oneshot-" + (running + 1) + "-1");
    long waiting = t.api.submitScript("{\"team\": \"a\"}", "true");
    await().atMost(1, TimeUnit.MINUTES).until(() -> jobsOf(waiting).size() == 1);
    await().atMost(1, TimeUnit.MINUTES).until(() -> podsOf(waiting).size() == 1);

    assertThat(t.api.post("/api/v1/builds/" + waiting + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(status(waiting)).isEqualTo("canceled");
    await().atMost(30, TimeUnit.SECONDS).until(() -> jobsOf(waiting).isEmpty());
    // Deleted with its pod (a Job deleted with the API's default, Orphan, would leave it).
    await().atMost(30, TimeUnit.SECONDS).until(() -> podsOf(waiting).isEmpty());

    assertThat(t.api.post("/api/v1/builds/" + running + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(awaitEnd(running)).isEqualTo("canceled");
    String job = "oneshot-" + running + "-1";
    await().atMost(30, TimeUnit.SECONDS).until(() -> !cluster.kubelet.running("team-a", job));
  }

  /**
   * A Job past its {@code activeDeadlineSeconds} is failed by Kubernetes and its pod gets SIGTERM,
   * which provisionerd takes as a drain: the build runs on to its route's timeout, ends once, and
   * its log says why the Job failed.
   */
  @Test
  void aJobPastItsDeadlineEndsTheBuildAndSaysSo() throws IOException {
    String dir =
        templates(
            t -> t.replace("spec:\n  template:", "spec:\n  activeDeadlineSeconds: 3\n  template:"));
    t =
        server()
            .launcherYaml(
                "{kind: kubernetes, kubernetes: {namespace: team-a, templateDir: \""
                    + dir
                    + "\", qps: 200, burst: 400}}")
            .routes(
                "routes: [{name: short, template: custom.yaml, namespace: team-a, timeout: 6s,"
                    + " cancelGrace: 2s}]")
            .start();
    Path marker = tmp.resolve("runs.txt");
    long id =
        t.api.submitScript(
            "{}", "echo run >> " + marker + "; echo started; while true; do sleep 0.1; done");
    assertThat(awaitEnd(id)).isIn("failed", "canceled");
    assertThat(Audit.lines(marker)).containsExactly("run");
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text LIKE ?",
                id,
                "Job oneshot-"
                    + id
                    + "-1 passed its activeDeadlineSeconds and Kubernetes stopped it%"))
        .isEqualTo(1);
    await().atMost(10, TimeUnit.SECONDS).until(() -> troubles("short", "deadline_exceeded") == 1);
  }

  /**
   * An image that cannot be pulled: the build's log says so while it waits, and the launch timeout
   * ends the build with the reason, having run nothing.
   */
  @Test
  void anImageThatCannotBePulledIsInTheLogAndEndsTheBuildAtItsLaunchTimeout() throws IOException {
    String dir =
        templates(
            t ->
                t.replace(
                    "image: ghcr.io/oneshot-dev/oneshot:0.1.0",
                    "image: registry.example/oneshot:missing"));
    t =
        server()
            .launcherYaml(
                "{kind: kubernetes, kubernetes: {namespace: team-a, templateDir: \""
                    + dir
                    + "\", qps: 200, burst: 400}}")
            .routes(
                "routes: [{name: bad-image, template: custom.yaml, namespace: team-a,"
                    + " launchTimeout: 4s, maxAttempts: 1}]")
            .start();
    long id = t.api.submitScript("{}", "echo never");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(Sql.value("SELECT started_at FROM oneshot.builds WHERE id = ?", id)).isNull();
    String log =
        String.join(
            "\n",
            Sql.rows("SELECT text FROM oneshot.build_logs WHERE build_id = ? ORDER BY seq", id)
                .stream()
                .map(r -> (String) r.get("text"))
                .toList());
    assertThat(log).contains("ErrImagePull").contains("registry.example/oneshot:missing");
    await().atMost(10, TimeUnit.SECONDS).until(() -> troubles("bad-image", "image_pull") == 1);
    assertThat(error(id))
        .as("the launch timeout says what the pod was waiting on")
        .startsWith("the attempt did not start within the launch timeout of 4s: container")
        .containsPattern(
            "cannot start: (ErrImagePull|ImagePullBackOff): .*registry.example/oneshot:missing");
    // The rescuer deleted the Job: builds show no longer points kubectl at it, and says why.
    await().atMost(10, TimeUnit.SECONDS).until(() -> jobsOf(id).isEmpty());
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () -> t.api.get("/api/v1/builds/" + id).json().path("launch").hasNonNull("removedAt"));
    JsonNode launch = t.api.get("/api/v1/builds/" + id).json().path("launch");
    assertThat(launch.path("removedWhy").asText()).contains("launch timeout of 4s");
    assertThat(buildsShow(id))
        .doesNotContain("kubectl logs")
        .containsPattern(
            "removed +\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d \\S+: .*launch timeout of 4s")
        .contains("its log: oneshot builds logs " + id);
  }

  /**
   * A pod whose Job is gone (deleted with {@code --cascade=orphan}: the pod stays) says nothing
   * more of its attempt: the kubelet's next word on it is neither logged nor counted again. The
   * real node showed it (a pod's last status updates after its Job was deleted counted its trouble
   * twice).
   */
  @Test
  void aPodWhoseJobIsGoneSaysNothingMore() throws IOException {
    String dir =
        templates(
            t ->
                t.replace(
                    "image: ghcr.io/oneshot-dev/oneshot:0.1.0",
                    "image: registry.example/oneshot:missing"));
    t =
        server()
            .launcherYaml(
                "{kind: kubernetes, kubernetes: {namespace: team-a, templateDir: \""
                    + dir
                    + "\", qps: 200, burst: 400}}")
            .routes(
                "routes: [{name: bad-image, tags: {image: bad}, template: custom.yaml,"
                    + " namespace: team-a, launchTimeout: 1h, maxAttempts: 1},"
                    + " {name: good, untagged: true, template: script.yaml, namespace: team-a}]")
            .start();
    long id = t.api.submitScript("{\"image\": \"bad\"}", "echo never");
    String like = "container provisionerd cannot start: %";
    String cannotStart =
        "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text LIKE ?";
    // Both of the fake kubelet's words on it: ErrImagePull, then ImagePullBackOff.
    await().atMost(30, TimeUnit.SECONDS).until(() -> Sql.count(cannotStart, id, like) == 2);
    assertThat(troubles("bad-image", "image_pull")).isEqualTo(1);
    String job = "oneshot-" + id + "-1";
    String pod = podsOf(id).get(0).getMetadata().getName();
    cluster
        .admin
        .batch()
        .v1()
        .jobs()
        .inNamespace("team-a")
        .withName(job)
        .withPropagationPolicy(io.fabric8.kubernetes.api.model.DeletionPropagation.ORPHAN)
        .delete();
    KubernetesLauncher launcher = (KubernetesLauncher) t.server.launcher();
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> launcher.watch().cachedJob("team-a", job) == null);
    // A word on the orphaned pod, then a build of the other route: its pod's events come after
    // in the same watch, so once its pod is said to be scheduled the orphan's word was heard.
    cluster
        .admin
        .pods()
        .inNamespace("team-a")
        .withName(pod)
        .edit(
            p ->
                new PodBuilder(p)
                    .editMetadata()
                    .addToLabels("touched", "yes")
                    .endMetadata()
                    .build());
    long after = t.api.submitScript("{}", "echo fine");
    assertThat(awaitEnd(after)).isEqualTo("succeeded");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> Sql.count(cannotStart.replace("LIKE ?", "LIKE 'pod % scheduled%'"), after) == 1);
    assertThat(Sql.count(cannotStart, id, like)).as("said once each").isEqualTo(2);
    assertThat(troubles("bad-image", "image_pull")).as("counted once").isEqualTo(1);
  }

  /**
   * An API server that silently drops the Job fields that spare the cluster a second pod: each
   * dropped field is named once, in {@code /readyz} (still ready: the runner binding keeps builds
   * safe), however many Jobs are made.
   */
  @Test
  void jobFieldsTheApiServerDropsAreNamedOnceInReadyz() {
    cluster.dispatcher.dropJobSpecFields(
        "podFailurePolicy", "podReplacementPolicy", "backoffLimit");
    t = server().start();
    long a = t.api.submitScript("{\"team\": \"a\"}", "true");
    long b = t.api.submitScript("{\"team\": \"b\"}", "true");
    assertThat(awaitEnd(a)).isEqualTo("succeeded");
    assertThat(awaitEnd(b)).isEqualTo("succeeded");
    Job kept = jobsOf(a).get(0);
    assertThat(kept.getSpec().getPodReplacementPolicy()).as("the fake dropped it").isNull();

    Api.Response ready = t.api.get("/readyz");
    assertThat(ready.status()).isEqualTo(200);
    List<String> warnings = new ArrayList<>();
    ready.json().path("launcherWarnings").forEach(w -> warnings.add(w.asText()));
    assertThat(warnings).hasSize(3);
    assertThat(warnings.get(0)).contains("did not keep spec.podFailurePolicy of Job ");
    assertThat(warnings.get(1)).contains("did not keep spec.podReplacementPolicy of Job ");
    assertThat(warnings.get(2)).contains("did not keep spec.backoffLimit: 0 (kept as 6) of Job ");
  }

  /**
   * A running build's pod is deleted on a cluster whose Job controller replaces it at once (no
   * {@code podReplacementPolicy}, as before 1.28), and the old pod gets SIGTERM only after the new
   * one has started: the new pod's provisionerd is refused, oneshot deletes that pod once it has
   * exited (so no third pod replaces it), the old pod's provisionerd goes on with the build (a
   * drain is no cancel) until it is canceled, and the script ran once.
   */
  @Test
  void aDeletedPodReplacedAtOnceDoesNotRunTheScriptAgain() {
    Path marker = tmp.resolve("runs.txt");
    long id = endlessScript(marker, true);
    String deleted = deleteRunningPod(id, () -> Audit.lines(marker).size() == 1);
    cancelOnceDraining(id);
    assertThat(awaitEnd(id)).isEqualTo("canceled");
    assertThat(Audit.lines(marker)).as("the script ran once").containsExactly("run");
    assertRefusedPodRemoved(id, deleted);
  }

  /**
   * A build whose pod was deleted goes on (provisionerd got SIGTERM and says so in the log, the
   * build still running); then it is canceled through the API, the only way to stop it.
   */
  private void cancelOnceDraining(long id) {
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text LIKE"
                            + " 'provisionerd got SIGTERM%'",
                        id)
                    == 1);
    assertThat(status(id)).isEqualTo("running");
    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
  }

  /**
   * The same deletion on a cluster that honours the {@code podReplacementPolicy: Failed} oneshot
   * sets: no second pod while the first terminates; the build goes on, having run once, until it is
   * canceled.
   */
  @Test
  void aDeletedPodIsNotReplacedWhileItTerminates() {
    Path marker = tmp.resolve("runs.txt");
    long id = endlessScript(marker, false);
    await().atMost(2, TimeUnit.MINUTES).until(() -> Audit.lines(marker).size() == 1);
    List<String> pods = cluster.kubelet.podsOf("team-a", "oneshot-" + id + "-1");
    assertThat(pods).hasSize(1);
    assertThat(cluster.admin.pods().inNamespace("team-a").withName(pods.get(0)).delete())
        .isNotEmpty();
    cancelOnceDraining(id);
    assertThat(awaitEnd(id)).isEqualTo("canceled");
    assertThat(cluster.kubelet.podsOf("team-a", "oneshot-" + id + "-1")).hasSize(1);
    assertThat(Audit.conflicts(id)).isZero();
    assertThat(Audit.lines(marker)).containsExactly("run");
  }

  /**
   * A refused second runner's pod is deleted only when it is the pod the runner named, by UID too:
   * a pod of the same name made since (a Job controller that replaced it) is another pod, and is
   * left alone; the pod of the runner that holds the attempt is never touched.
   */
  @Test
  void aSecondRunnersPodIsDeletedOnlyWhenItsUidIsTheOneTheRunnerGave() {
    KubernetesLauncher[] made = new KubernetesLauncher[1];
    t =
        server()
            .launchers(
                (vertx, cfg) -> made[0] = KubernetesLauncher.create(cfg, cluster.clientFor(vertx)))
            .start();
    AttemptRef ref = new AttemptRef(41, 1, "oneshot-41-1", "team-a");
    Pod pod =
        cluster
            .admin
            .pods()
            .inNamespace("team-a")
            .resource(
                new PodBuilder()
                    .withNewMetadata()
                    .withName("oneshot-41-1-abcde")
                    .withNamespace("team-a")
                    .addToLabels(JobFactory.MANAGED_BY, "oneshot")
                    .addToLabels(JobFactory.BUILD, "41")
                    .addToLabels(JobFactory.ATTEMPT, "1")
                    .endMetadata()
                    .withNewSpec()
                    .addNewContainer()
                    .withName("provisionerd")
                    .withImage("oneshot")
                    .endContainer()
                    .endSpec()
                    .build())
            .create();
    // The refused provisionerd has exited, as it does at once.
    pod.setStatus(new PodStatusBuilder().withPhase("Failed").build());
    cluster.admin.pods().inNamespace("team-a").resource(pod).updateStatus();
    String uid = pod.getMetadata().getUid();
    assertThat(uid).isNotNull();
    Runner holder = new Runner("holder", "oneshot-41-1-fghij", "uid-of-holder", null, null);

    made[0].removeRunner(
        ref,
        new Runner("intruder", pod.getMetadata().getName(), "uid-of-another", null, null),
        holder);
    assertThat(
            cluster.admin.pods().inNamespace("team-a").withName(pod.getMetadata().getName()).get())
        .as("a pod of that name but another UID is left alone")
        .isNotNull();

    made[0].removeRunner(
        new AttemptRef(41, 2, "oneshot-41-2", "team-a"),
        new Runner("intruder", pod.getMetadata().getName(), uid, null, null),
        holder);
    assertThat(
            cluster.admin.pods().inNamespace("team-a").withName(pod.getMetadata().getName()).get())
        .as("a pod of another attempt is left alone")
        .isNotNull();

    made[0].removeRunner(
        ref, new Runner("intruder", pod.getMetadata().getName(), uid, null, null), holder);
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                cluster
                        .admin
                        .pods()
                        .inNamespace("team-a")
                        .withName(pod.getMetadata().getName())
                        .get()
                    == null);
  }

  /**
   * A runner is proven only by its pod's projected token for oneshot's audience, reviewed by the
   * API server, and only as the runner of the attempt whose Job made that pod: what it states of
   * itself counts for nothing, a token the API server never issued, one for another audience, one
   * of a pod that only looks like an attempt's, and one of a pod that is gone prove nobody; a token
   * already proven stays proven through its pod's deletion (a drain lets the build finish).
   */
  @Test
  void aRunnerIsProvenByItsPodsTokenAloneAndOnlyForItsOwnAttempt() {
    KubernetesLauncher[] made = new KubernetesLauncher[1];
    t =
        server()
            .routes(
                "routes: [{name: endless, tags: {team: a}, template: script.yaml,"
                    + " namespace: team-a, cancelGrace: 3s}]")
            .launchers(
                (vertx, cfg) -> made[0] = KubernetesLauncher.create(cfg, cluster.clientFor(vertx)))
            .start();
    long id = t.api.submitScript("{\"team\": \"a\"}", "echo started; sleep 600");
    await().atMost(60, TimeUnit.SECONDS).until(() -> TestServer.status(id).equals("running"));
    Pod pod =
        cluster
            .admin
            .pods()
            .inNamespace("team-a")
            .withLabel("job-name", "oneshot-" + id + "-1")
            .list()
            .getItems()
            .get(0);
    String uid = pod.getMetadata().getUid();
    Runner forged = new Runner("forged-runner", "some-pod", "some-uid", "host", 1L);
    java.util.function.Function<String, io.oneshot.launch.RunnerProof> prove =
        token ->
            made[0].prove(new io.oneshot.launch.RunnerCall("10.0.0.9", 40000, port, token, forged));

    String good = cluster.tokens.issue(pod, JobFactory.AUDIENCE, 3600);
    assertThat(prove.apply(good))
        .isEqualTo(
            new io.oneshot.launch.RunnerProof.Proven(
                new Runner("pod-" + uid, pod.getMetadata().getName(), uid, null, null),
                new AttemptRef(id, 1, "oneshot-" + id + "-1", "team-a")));
    assertThat(prove.apply(null))
        .isInstanceOf(io.oneshot.launch.RunnerProof.Unproven.class)
        .hasToString(
            "Unproven[why=it carries no token of its pod (the header Oneshot-Runner-Proof: the"
                + " projected ServiceAccount token oneshot mounts in build pods)]");
    assertThat(prove.apply("fake-sa-token.never-issued"))
        .isEqualTo(
            new io.oneshot.launch.RunnerProof.Unproven(
                "the API server does not accept its pod token (invalid bearer token)"));
    assertThat(
            prove.apply(
                cluster.tokens.issue(pod, "https://kubernetes.default.svc.cluster.local", 3600)))
        .isInstanceOf(io.oneshot.launch.RunnerProof.Unproven.class)
        .asString()
        .contains("is invalid for the target audiences [\"oneshot.io/runner\"]");

    // A pod made by hand with the attempt's labels, in the same namespace: not the Job's.
    Pod lookalike =
        cluster
            .admin
            .pods()
            .inNamespace("team-a")
            .resource(
                new PodBuilder()
                    .withNewMetadata()
                    .withName("oneshot-" + id + "-1-fake")
                    .withNamespace("team-a")
                    .addToLabels(JobFactory.MANAGED_BY, "oneshot")
                    .addToLabels(JobFactory.BUILD, Long.toString(id))
                    .addToLabels(JobFactory.ATTEMPT, "1")
                    .addToLabels("job-name", "oneshot-" + id + "-1")
                    .endMetadata()
                    .withNewSpec()
                    .addNewContainer()
                    .withName("provisionerd")
                    .withImage("oneshot")
                    .endContainer()
                    .endSpec()
                    .build())
            .create();
    assertThat(prove.apply(cluster.tokens.issue(lookalike, JobFactory.AUDIENCE, 3600)))
        .isInstanceOf(io.oneshot.launch.RunnerProof.Unproven.class)
        .asString()
        .contains("is not a pod of the Job oneshot made for it");
    cluster.admin.pods().inNamespace("team-a").resource(lookalike).withGracePeriod(0).delete();

    // The pod goes: a token of it reviewed now proves nothing; the one proven before still does.
    String late = cluster.tokens.issue(pod, JobFactory.AUDIENCE, 3600);
    cluster.admin.pods().inNamespace("team-a").resource(pod).withGracePeriod(0).delete();
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                cluster
                        .admin
                        .pods()
                        .inNamespace("team-a")
                        .withName(pod.getMetadata().getName())
                        .get()
                    == null);
    assertThat(prove.apply(late))
        .isEqualTo(
            new io.oneshot.launch.RunnerProof.Unproven(
                "the API server does not accept its pod token (Token has been invalidated)"));
    assertThat(prove.apply(good)).isInstanceOf(io.oneshot.launch.RunnerProof.Proven.class);
  }

  /**
   * Starts a server whose route gives a stopping build 3 s, and submits a script that notes its run
   * in {@code marker} and runs until killed ({@code ignoresTerm}: through SIGTERM too).
   */
  private long endlessScript(Path marker, boolean ignoresTerm) {
    t =
        server()
            .routes(
                "routes: [{name: endless, tags: {team: a}, template: script.yaml,"
                    + " namespace: team-a, cancelGrace: 3s}]")
            .start();
    return t.api.submitScript(
        "{\"team\": \"a\"}",
        (ignoresTerm ? "trap '' TERM; " : "")
            + "echo run >> "
            + marker
            + "; echo started; while true; do sleep 0.1; done");
  }

  /** The same, mid-apply: terraform applies once, and the workspace's state stays one line. */
  @Test
  void aDeletedPodReplacedAtOnceDoesNotApplyAgain() {
    TerraformOnPath.assume();
    t =
        server()
            .routes(
                "routes: [{name: tf, template: terraform.yaml, namespace: team-a,"
                    + " cancelGrace: 3s}]")
            .start();
    Path marker = tmp.resolve("applies.txt");
    String mainTf =
        """
        resource "terraform_data" "first" { input = "one" }
        resource "terraform_data" "slow" {
          depends_on = [terraform_data.first]
          provisioner "local-exec" {
            command = "trap '' INT TERM; echo apply >> %s; while true; do sleep 0.1; done"
          }
        }
        """
            .formatted(marker);
    long id = t.api.submitTerraform("ws-deleted", mainTf);
    String deleted = deleteRunningPod(id, () -> Audit.lines(marker).size() == 1);
    cancelOnceDraining(id);
    assertThat(awaitEnd(id)).isEqualTo("canceled");
    assertThat(Audit.lines(marker)).as("one terraform apply").containsExactly("apply");
    assertRefusedPodRemoved(id, deleted);

    long next =
        t.api.submitTerraform(
            "ws-deleted", "resource \"terraform_data\" \"first\" { input = \"one\" }");
    assertThat(awaitEnd(next)).isEqualTo("succeeded");
    Audit.workspace("ws-deleted");
  }

  /**
   * Once {@code ready}, deletes the build's only pod as {@code kubectl delete pod} would, with the
   * kubelet replacing it at once and holding the old pod's SIGTERM until the new pod's runner has
   * been refused. Returns the deleted pod's name.
   */
  private String deleteRunningPod(long id, java.util.concurrent.Callable<Boolean> ready) {
    await().atMost(2, TimeUnit.MINUTES).until(ready);
    assertThat(status(id)).isEqualTo("running");
    List<String> pods = cluster.kubelet.podsOf("team-a", "oneshot-" + id + "-1");
    assertThat(pods).hasSize(1);
    cluster.kubelet.replaceDeletedPods();
    cluster.kubelet.beforeStop(
        pod -> await().atMost(1, TimeUnit.MINUTES).until(() -> Audit.conflicts(id) >= 1));
    assertThat(cluster.admin.pods().inNamespace("team-a").withName(pods.get(0)).delete())
        .isNotEmpty();
    return pods.get(0);
  }

  /**
   * The build's timeline shows one refused runner; oneshot deleted its pod (after it exited, so the
   * Job controller made no third pod) and never the holder's.
   */
  private void assertRefusedPodRemoved(long id, String holderPod) {
    List<String> pods = cluster.kubelet.podsOf("team-a", "oneshot-" + id + "-1");
    assertThat(pods).hasSize(2).startsWith(holderPod);
    String refused = pods.get(1);
    assertThat(Audit.conflicts(id)).isEqualTo(1);
    String podPath = "/api/v1/namespaces/team-a/pods/";
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () ->
                cluster.dispatcher.requests.stream()
                    .anyMatch(
                        r ->
                            r.userAgent().equals(MockCluster.DISPATCHER_AGENT)
                                && r.method().equals("DELETE")
                                && r.path().startsWith(podPath + refused)));
    assertThat(cluster.dispatcher.requests)
        .noneMatch(
            r ->
                r.userAgent().equals(MockCluster.DISPATCHER_AGENT)
                    && r.method().equals("DELETE")
                    && r.path().startsWith(podPath + holderPod));
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text LIKE ?",
                id,
                "%deleted pod " + refused + ": a second pod of this attempt (refused)%"))
        .isEqualTo(1);
    assertThat(cluster.kubelet.podsOf("team-a", "oneshot-" + id + "-1")).hasSize(2);
    assertThat(t.api.get("/api/v1/builds/" + id).json().path("events").toString())
        .as("the timeline says the pod was deleted")
        .contains(
            "pod "
                + holderPod
                + " is being deleted while it runs the build; provisionerd gets SIGTERM and"
                + " finishes the build");
  }

  /**
   * The dispatcher's real calls (told from the fake kubelet's by their User-Agent) through a
   * build's whole life, a cancel and a restart that adopts a running Job: the Helm chart's Role
   * grants every one of them, and nothing they do not need.
   */
  @Test
  void theDispatcherAsksTheApiServerForNothingTheChartsRoleDoesNotGrant() throws Exception {
    Path gate = tmp.resolve("gate");
    t = server().start();
    long ok = t.api.submitScript("{\"team\": \"b\"}", "echo fine");
    assertThat(awaitEnd(ok)).isEqualTo("succeeded");
    long adopted = gated("b", gate);
    await().atMost(1, TimeUnit.MINUTES).until(() -> status(adopted).equals("running"));
    // Canceled while its pod cannot start: the dispatcher deletes the Job and its Secret.
    cluster.kubelet.hold("oneshot-" + (adopted + 1) + "-1");
    long canceled = t.api.submitScript("{\"team\": \"a\"}", "true");
    await().atMost(1, TimeUnit.MINUTES).until(() -> jobsOf(canceled).size() == 1);
    assertThat(t.api.post("/api/v1/builds/" + canceled + "/cancel", "{}").status()).isEqualTo(202);
    await().atMost(30, TimeUnit.SECONDS).until(() -> jobsOf(canceled).isEmpty());
    t.close();
    t = server().keepQueue().start();
    Files.createFile(gate);
    assertThat(awaitEnd(adopted)).isEqualTo("succeeded");

    Set<String> used = new java.util.TreeSet<>(cluster.dispatcherAccess());
    // The API server's version: readable by every authenticated user (system:public-info-viewer).
    assertThat(used.remove("non-resource /version get")).isTrue();
    Set<String> granted =
        io.oneshot.testing.Chart.roleAccess(
            io.oneshot.testing.Chart.render(c -> c.set("buildNamespace", "team-a")));
    assertThat(granted).containsAll(used);
    // A Job or a pod is read by name only when the informer has not seen it yet (a race this run
    // may not hit: a Job at launch, or a pod or Job whose runner proves itself first), a pod is
    // deleted only when it is a second runner of an attempt (its own test), and a
    // Secret is patched only when a launch finds it made already (a launch tried again, or by a
    // restarted dispatcher: aRestartedDispatcherAdoptsRemovesOrphansAndCreatesMissingJobs);
    // balloons (Deployments, and reading their PriorityClass) are kept for warm routes only, which
    // this run has none of (WarmRealNodeTest and the chart's own account on the real node use
    // them); everything else the Role grants, this run used.
    Set<String> unused = new java.util.TreeSet<>(granted);
    unused.removeAll(used);
    assertThat(unused)
        .isSubsetOf(
            "batch/jobs get",
            "/pods get",
            "/pods delete",
            "/secrets patch",
            "apps/deployments create",
            "apps/deployments list",
            "apps/deployments watch",
            "apps/deployments update",
            "apps/deployments patch",
            "apps/deployments delete",
            "scheduling.k8s.io/priorityclasses get");
  }

  @Test
  void aTerraformBuildsTimelineHasEveryStageInOrder() {
    TerraformOnPath.assume();
    t =
        server()
            .routes("routes: [{name: tf, template: terraform.yaml, namespace: team-a}]")
            .start();
    // provisionerd starts once the container's start is in the timeline, as on a real cluster
    // (where the informer hears of it long before a JVM has started and acquired).
    cluster.kubelet.beforeStart(
        job ->
            await()
                .atMost(30, TimeUnit.SECONDS)
                .until(
                    () ->
                        Sql.count(
                                "SELECT count(*) FROM oneshot.build_events WHERE build_id = ?"
                                    + " AND reason LIKE 'container provisionerd started%'",
                                Long.parseLong(job.split("-")[1]))
                            == 1));
    String body =
        """
        {"workspace": "timeline", "input": {"provisioner": "terraform", "transition": "apply",
         "files": {"main.tf": "resource \\"terraform_data\\" \\"x\\" { input = 1 }"}}}
        """;
    Api.Response r = t.api.post("/api/v1/builds", body);
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    long id = r.json().path("id").asLong();
    assertThat(awaitEnd(id)).isEqualTo("succeeded");

    JsonNode b = t.api.get("/api/v1/builds/" + id).json();
    List<String> stages = new ArrayList<>();
    Instant last = Instant.EPOCH;
    for (JsonNode e : b.path("events")) {
      Instant at = Instant.parse(e.path("at").asText());
      assertThat(at).as("events in time order").isAfterOrEqualTo(last);
      last = at;
      stages.add(stage(e));
    }
    assertThat(stages)
        .containsExactly(
            "enqueued",
            "claimed",
            "Job created",
            "pod scheduled",
            "container started",
            "acquired",
            "terraform init",
            "terraform plan",
            "terraform apply",
            "finished");

    assertThat(buildsShow(id))
        .as("the runner that ran it, by fingerprint and pod")
        .containsPattern("runner +[0-9a-f]{8} in pod oneshot-" + id + "-1-[a-z0-9]+, since 20");
    assertThat(buildsShow(id))
        .containsSubsequence(
            "timeline",
            "enqueued",
            "pending → launching",
            "launched Job team-a/oneshot-" + id + "-1 created",
            "scheduled on node fake-node-1",
            "container provisionerd started",
            "launching → running",
            "terraform init started",
            "terraform plan started",
            "terraform apply started",
            "running → succeeded");
  }

  /** What {@code oneshot builds show ID} prints; the command must succeed. */
  private String buildsShow(long id) {
    java.io.StringWriter shown = new java.io.StringWriter();
    int code =
        io.oneshot.cli.Main.commandLine(
                new java.io.PrintWriter(shown, true),
                new java.io.PrintWriter(new java.io.StringWriter()))
            .execute(
                "builds",
                "show",
                Long.toString(id),
                "--url",
                t.api.base(),
                "--token",
                TestServer.ADMIN_TOKEN);
    assertThat(code).isZero();
    return shown.toString();
  }

  /** What step of a build's life a timeline event marks. */
  private static String stage(JsonNode e) {
    String from = e.path("from").isNull() ? null : e.path("from").asText();
    String to = e.path("to").asText();
    String why = e.path("reason").asText();
    if (from == null) {
      return "enqueued";
    } else if (from.equals("pending") && to.equals("launching")) {
      return "claimed";
    } else if (from.equals("launching") && to.equals("running")) {
      return "acquired";
    } else if (from.equals("running") && to.equals("succeeded")) {
      return "finished";
    } else if (why.startsWith("launched Job ")) {
      return "Job created";
    } else if (why.contains(" scheduled on node ")) {
      return "pod scheduled";
    } else if (why.startsWith("container provisionerd started")) {
      return "container started";
    } else if (why.matches("terraform (init|plan|apply) started: .*")) {
      return why.substring(0, why.indexOf(" started"));
    }
    return from + " → " + to + ": " + why;
  }
}
