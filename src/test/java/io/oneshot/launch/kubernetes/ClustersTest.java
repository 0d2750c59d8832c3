package io.oneshot.launch.kubernetes;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.testing.Heavy;
import io.oneshot.testing.Ports;
import io.oneshot.testing.PromText;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TcpProxy;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.FaultyDispatcher;
import io.oneshot.testing.k8s.MockCluster;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What one cluster's trouble does to the dispatcher (the mock API and its test kubelet, with faults
 * the real control planes of TwoClustersTest cannot be made to show quickly): a Role that lacks a
 * verb in one namespace stalls that namespace's route alone until the Role allows it; an API that
 * cannot be reached stalls its routes, costs their builds no attempt past its launch timeout, and
 * they run once it answers; a cluster that cannot be reached when the dispatcher starts holds up
 * nothing else and is started when it answers; a new leader stalls what the old one did.
 */
@Heavy
class ClustersTest {
  @TempDir Path tmp;
  private final List<AutoCloseable> closing = new ArrayList<>();
  private TestServer t;

  @AfterEach
  void tearDown() throws Exception {
    if (t != null) {
      t.close();
    }
    for (AutoCloseable c : closing.reversed()) {
      c.close();
    }
  }

  private MockCluster cluster(String name, String... namespaces) throws IOException {
    MockCluster c =
        new MockCluster(List.of(namespaces), Files.createDirectories(tmp.resolve(name)));
    closing.add(c);
    return c;
  }

  private TcpProxy proxyTo(MockCluster c) {
    TcpProxy p = new TcpProxy(List.of(c.address()));
    closing.add(0, p); // closed after the server, before its cluster
    return p;
  }

  /** A kubeconfig for the mock API server behind {@code proxy}. */
  private Path kubeconfig(TcpProxy proxy) throws IOException {
    return kubeconfig(proxy, "a-token");
  }

  /**
   * A kubeconfig for the mock API server behind {@code proxy} with {@code token}, written whole at
   * once (as the kubelet updates a mounted Secret).
   */
  private Path kubeconfig(TcpProxy proxy, String token) throws IOException {
    Path file = tmp.resolve("far-" + proxy.port() + ".kubeconfig");
    Path next = tmp.resolve("far-" + proxy.port() + ".next");
    Files.writeString(
        next,
        """
        apiVersion: v1
        kind: Config
        clusters:
        - {name: far, cluster: {server: "http://127.0.0.1:%d"}}
        users:
        - {name: far, user: {token: "%s"}}
        contexts:
        - {name: far, context: {cluster: far, user: far}}
        current-context: far
        """
            .formatted(proxy.port(), token));
    Files.move(
        next,
        file,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    return file;
  }

  private TestServer.Builder server(String routes, Connect connect) {
    return server(routes, connect, Ports.stable(), null);
  }

  /** A server on {@code port}; its pods reach it at {@code publicUrl} (null: that port). */
  private TestServer.Builder server(String routes, Connect connect, int port, String publicUrl) {
    return TestServer.with()
        .api(
            "{listen: \"127.0.0.1:%d\", publicUrl: \"%s\", adminToken: \"%s\"}"
                .formatted(
                    port,
                    publicUrl == null ? "http://127.0.0.1:" + port : publicUrl,
                    TestServer.ADMIN_TOKEN))
        .launcherYaml(
            "{kind: kubernetes, kubernetes: {namespace: team-a, templateDir: job-templates}}")
        .dispatch(
            "maxConcurrent: 6, pollInterval: 200ms, rescueInterval: 300ms, heartbeatInterval: 300ms")
        .routes(routes)
        .launchers((vertx, cfg) -> new Clusters(cfg, connect.on(vertx, cfg)));
  }

  /**
   * The home cluster's launcher on the mock {@code home}; any other's as the dispatcher makes it,
   * from its kubeconfig.
   */
  private static Connect homeAndFar(MockCluster home) {
    return (vertx, cfg) ->
        c ->
            c.name().equals("home")
                ? KubernetesLauncher.create(cfg, c, home.clientFor(vertx))
                : Clusters.connect(vertx, cfg, c);
  }

  /** Makes a cluster's launcher on the server's Vert.x. */
  @FunctionalInterface
  private interface Connect {
    Clusters.Connect on(io.vertx.core.Vertx vertx, io.oneshot.config.OneshotConfig cfg);
  }

  private static String awaitEnd(long id) {
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(() -> List.of("succeeded", "failed", "canceled").contains(status(id)));
    return status(id);
  }

  /** Why the build waits, as the API says it (a queued build's is worked out when it is read). */
  private String reason(long id) {
    return t.api.get("/api/v1/builds/" + id).json().path("reason").asText("");
  }

  private static int attempt(long id) {
    return (Integer) Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id);
  }

  private JsonNode cluster(String name) {
    return t.api.get("/readyz").json().path("clusters").path(name);
  }

  @Test
  void aRoleWithoutTheVerbInOneNamespaceStallsThatRouteAloneUntilTheRoleAllowsIt()
      throws IOException {
    MockCluster home = cluster("home", "team-a", "team-b");
    FaultyDispatcher.Fault noJobs =
        FaultyDispatcher.error(
            "POST",
            "^/apis/batch/v1/namespaces/team-b/jobs$",
            403,
            "Forbidden",
            "jobs.batch is forbidden: User system:serviceaccount:oneshot:oneshot cannot create"
                + " resource jobs in API group batch in the namespace team-b");
    home.dispatcher.addLasting(noJobs);
    home.dispatcher.deny("team-b");
    t =
        server(
                """
                routes:
                  - {name: team-a, tags: {team: a}, template: script.yaml, namespace: team-a}
                  - {name: team-b, tags: {team: b}, template: script.yaml, namespace: team-b, launchTimeout: 3s, maxAttempts: 1}
                """,
                (vertx, cfg) -> c -> KubernetesLauncher.create(cfg, c, home.clientFor(vertx)))
            .start();
    long b = t.api.submitScript("{\"team\": \"b\"}", "echo b");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> cluster("home").path("trouble").asText(""), r -> r.contains("team-b"));
    assertThat(cluster("home").path("stalledRoutes").toString())
        .contains("team-b")
        .doesNotContain("team-a");
    long a = t.api.submitScript("{\"team\": \"a\"}", "echo a");
    assertThat(awaitEnd(a)).as("the other namespace's route runs on").isEqualTo("succeeded");
    long b2 = t.api.submitScript("{\"team\": \"b\"}", "echo b2");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> reason(b2),
            r ->
                r.startsWith("route team-b takes no launches now")
                    && r.contains("the dispatcher may not create jobs.batch in namespace team-b"));
    JsonNode routes = t.api.get("/api/v1/routes").json();
    for (JsonNode r : routes) {
      if (r.path("name").asText().equals("team-b")) {
        assertThat(r.path("cluster").asText()).isEqualTo("home");
        assertThat(r.path("stalled").path("why").asText())
            .contains("may not create jobs.batch in namespace team-b");
      } else {
        assertThat(r.path("stalled").isNull() || r.path("stalled").isMissingNode()).isTrue();
      }
    }
    // Well past the route's launch timeout, nothing of it failed or spent an attempt.
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.builds WHERE id = ? AND now() - created_at"
                            + " > interval '6 seconds'",
                        b)
                    == 1);
    assertThat(List.of(status(b), status(b2))).doesNotContain("failed");
    // The operator fixes the Role: the next look sees it, the builds run.
    home.dispatcher.remove(noJobs);
    home.dispatcher.allow("team-b");
    assertThat(awaitEnd(b)).isEqualTo("succeeded");
    assertThat(awaitEnd(b2)).isEqualTo("succeeded");
    assertThat(attempt(b)).isEqualTo(1);
    assertThat(attempt(b2)).isEqualTo(1);
    await().atMost(30, TimeUnit.SECONDS).until(() -> cluster("home").path("ready").asBoolean());
  }

  /**
   * An account without the cluster-wide TokenReview (the chart's ClusterRole not bound in that
   * cluster): no build pod there could prove who it is, so its routes stall and say why, rather
   * than launch builds that wait for their proof until their launch timeout and fail; bound, they
   * run.
   */
  @Test
  void anAccountThatMayNotReviewTokensStallsItsRoutesUntilItMay() throws IOException {
    MockCluster home = cluster("home", "team-a");
    // As kube-apiserver refuses it (RBAC's Forbidden for a cluster-scoped resource).
    FaultyDispatcher.Fault noReviews =
        FaultyDispatcher.error(
            "POST",
            "^/apis/authentication.k8s.io/v1/tokenreviews",
            403,
            "Forbidden",
            "tokenreviews.authentication.k8s.io is forbidden: User"
                + " system:serviceaccount:oneshot:oneshot cannot create resource tokenreviews in"
                + " API group authentication.k8s.io at the cluster scope");
    home.dispatcher.addLasting(noReviews);
    home.dispatcher.deny(FaultyDispatcher.CLUSTER_WIDE);
    t =
        server(
                """
                routes:
                  - {name: team-a, tags: {team: a}, template: script.yaml, namespace: team-a, launchTimeout: 3s, maxAttempts: 1}
                """,
                (vertx, cfg) -> c -> KubernetesLauncher.create(cfg, c, home.clientFor(vertx)))
            .start();
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> cluster("home").path("trouble").asText(""),
            r -> r.contains("may not create tokenreviews.authentication.k8s.io (cluster-wide"));
    long a = t.api.submitScript("{\"team\": \"a\"}", "echo a");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> reason(a),
            r ->
                r.startsWith("route team-a takes no launches now")
                    && r.contains("tokenreviews.authentication.k8s.io"));
    // Well past the route's launch timeout: nothing launched, nothing failed.
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.builds WHERE id = ? AND now() - created_at"
                            + " > interval '6 seconds'",
                        a)
                    == 1);
    assertThat(status(a)).isEqualTo("pending");
    assertThat(home.admin.batch().v1().jobs().inAnyNamespace().list().getItems()).isEmpty();
    home.dispatcher.remove(noReviews);
    home.dispatcher.allow(FaultyDispatcher.CLUSTER_WIDE);
    assertThat(awaitEnd(a)).isEqualTo("succeeded");
    assertThat(attempt(a)).isEqualTo(1);
    await().atMost(30, TimeUnit.SECONDS).until(() -> cluster("home").path("ready").asBoolean());
  }

  @Test
  void anUnreachableApiStallsItsRoutesWithoutSpendingAttemptsAndTheyRunOnceItAnswers()
      throws IOException {
    MockCluster home = cluster("home", "team-a");
    TcpProxy proxy = proxyTo(home);
    t =
        server(
                "routes: [{name: team-a, tags: {team: a}, template: script.yaml, namespace: team-a,"
                    + " launchTimeout: 3s, maxAttempts: 1}]",
                (vertx, cfg) ->
                    c -> KubernetesLauncher.create(cfg, c, home.clientThrough(vertx, proxy)))
            .start();
    proxy.cut();
    long first = t.api.submitScript("{\"team\": \"a\"}", "echo first");
    String api = "cannot reach the Kubernetes API at http://127.0.0.1:" + proxy.port() + "/: ";
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> !cluster("home").path("ready").asBoolean(true));
    assertThat(cluster("home").path("trouble").asText()).startsWith(api);
    assertThat(t.api.get("/readyz").json().path("kubernetes").path("reachable").asBoolean())
        .isFalse();
    assertThat(
            PromText.parse(t.api.get("/metrics").text())
                .value("oneshot_cluster_ready", "cluster", "home"))
        .isEqualTo(0.0);
    assertThat(
            PromText.parse(t.api.get("/metrics").text())
                .value("oneshot_cluster_reachable", "cluster", "home"))
        .isEqualTo(0.0);
    long second = t.api.submitScript("{\"team\": \"a\"}", "echo second");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> reason(second),
            r -> r.startsWith("route team-a takes no launches now") && r.contains(api));
    assertThat(status(second)).isEqualTo("pending");
    // The console's overview says it: the cluster in trouble, and the route that waits for it.
    try (io.oneshot.testing.Browser browser = io.oneshot.testing.Browser.start("clusters")) {
      org.openqa.selenium.WebDriver d = browser.driver;
      var wait =
          new org.openqa.selenium.support.ui.WebDriverWait(d, java.time.Duration.ofSeconds(20));
      wait.ignoring(org.openqa.selenium.StaleElementReferenceException.class);
      d.get(t.api.base() + "/ui/");
      wait.until(
              org.openqa.selenium.support.ui.ExpectedConditions.visibilityOfElementLocated(
                  org.openqa.selenium.By.id("token")))
          .sendKeys(TestServer.ADMIN_TOKEN);
      d.findElement(org.openqa.selenium.By.id("sign-in")).click();
      assertThat(
              wait.until(
                      org.openqa.selenium.support.ui.ExpectedConditions.visibilityOfElementLocated(
                          org.openqa.selenium.By.cssSelector(
                              "[data-route=team-a] [data-k=stalled]")))
                  .getText())
          .startsWith("takes no launches now")
          .contains(api);
      assertThat(d.findElement(org.openqa.selenium.By.cssSelector("[data-cluster=home]")).getText())
          .contains("cluster home: " + api);
      browser.screenshot("a-route-stalled-on-its-cluster");
    }
    // Past the launch timeout (claimed before the stall was seen, or not), nothing failed.
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.builds WHERE id = ? AND now() - created_at"
                            + " > interval '6 seconds'",
                        first)
                    == 1);
    assertThat(status(first)).isIn("launching", "pending");
    proxy.restore();
    assertThat(awaitEnd(first)).isEqualTo("succeeded");
    assertThat(awaitEnd(second)).isEqualTo("succeeded");
    assertThat(attempt(first)).isEqualTo(1);
    assertThat(attempt(second)).isEqualTo(1);
    await().atMost(30, TimeUnit.SECONDS).until(() -> cluster("home").path("ready").asBoolean());
    assertThat(
            PromText.parse(t.api.get("/metrics").text())
                .value("oneshot_cluster_ready", "cluster", "home"))
        .isEqualTo(1.0);
  }

  @Test
  void aClusterThatCannotBeReachedAtStartHoldsUpNothingAndStartsWhenItAnswers() throws IOException {
    MockCluster home = cluster("home", "team-a");
    MockCluster far = cluster("far", "team-far");
    TcpProxy toFar = proxyTo(far);
    toFar.cut();
    Path kubeconfig = kubeconfig(toFar);
    t =
        server(
                """
                clusters:
                  - {name: far, kubeconfig: %s, namespace: team-far}
                routes:
                  - {name: near, tags: {at: near}, template: script.yaml, namespace: team-a}
                  - {name: away, tags: {at: far}, template: script.yaml, cluster: far}
                """
                    .formatted(kubeconfig),
                homeAndFar(home))
            .start();
    assertThat(cluster("far").path("trouble").asText()).startsWith("not started: cannot reach");
    long away = t.api.submitScript("{\"at\": \"far\"}", "echo away");
    long near = t.api.submitScript("{\"at\": \"near\"}", "echo near");
    assertThat(awaitEnd(near)).isEqualTo("succeeded");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> reason(away), r -> r.contains("cluster far: not started: cannot reach"));
    toFar.restore();
    assertThat(awaitEnd(away)).isEqualTo("succeeded");
    assertThat(attempt(away)).isEqualTo(1);
    assertThat(
            far.admin
                .batch()
                .v1()
                .jobs()
                .inNamespace("team-far")
                .withLabel("oneshot.io/build", Long.toString(away))
                .list()
                .getItems())
        .hasSize(1);
    assertThat(
            home.admin
                .batch()
                .v1()
                .jobs()
                .inAnyNamespace()
                .withLabel("oneshot.io/build", Long.toString(away))
                .list()
                .getItems())
        .isEmpty();
  }

  /**
   * The leader stops while another cluster is away: the new leader keeps its routes stalled (what
   * it sees itself, written again), leaves its builds alone, and launches them once when it
   * answers; the dispatcher's own cluster runs on throughout.
   */
  @Test
  void aNewLeaderKeepsAnAwayClustersRoutesStalledAndLaunchesThemOnceWhenItAnswers()
      throws IOException {
    MockCluster home = cluster("home", "team-a");
    MockCluster far = cluster("far", "team-far");
    TcpProxy toFar = proxyTo(far);
    Path kubeconfig = kubeconfig(toFar);
    String routes =
        """
        clusters:
          - {name: far, kubeconfig: %s, namespace: team-far}
        routes:
          - {name: near, tags: {at: near}, template: script.yaml, namespace: team-a}
          - {name: away, tags: {at: far}, template: script.yaml, cluster: far, launchTimeout: 3s}
        """
            .formatted(kubeconfig);
    Connect connect = homeAndFar(home);
    int firstPort = Ports.stable();
    int secondPort = Ports.stable();
    // The Service in front of both replicas: pods reach whichever answers.
    TcpProxy service =
        new TcpProxy(
            List.of(
                new java.net.InetSocketAddress("127.0.0.1", firstPort),
                new java.net.InetSocketAddress("127.0.0.1", secondPort)));
    closing.add(0, service);
    String url = "http://127.0.0.1:" + service.port();
    TestServer first = server(routes, connect, firstPort, url).start();
    await().atMost(30, TimeUnit.SECONDS).until(first.server::leader);
    TestServer second = server(routes, connect, secondPort, url).keepQueue().start();
    toFar.cut();
    List<Long> away = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      away.add(first.api.submitScript("{\"at\": \"far\"}", "echo away-" + i));
    }
    t = first;
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> reason(away.get(2)), r -> r.contains("cluster far"));
    // The leader goes; the other takes over with the far cluster still away.
    first.close();
    t = second;
    await().atMost(60, TimeUnit.SECONDS).until(second.server::leader);
    Sql.exec("UPDATE oneshot.routes SET stalled = NULL, stalled_at = NULL");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> Sql.value("SELECT stalled FROM oneshot.routes WHERE name = 'away'"),
            v -> v != null && v.toString().contains("cannot reach"));
    long near = second.api.submitScript("{\"at\": \"near\"}", "echo near");
    assertThat(awaitEnd(near)).isEqualTo("succeeded");
    assertThat(away.stream().map(id -> status(id))).doesNotContain("failed", "succeeded");
    toFar.restore();
    for (long id : away) {
      assertThat(awaitEnd(id)).as("build %d", id).isEqualTo("succeeded");
      assertThat(attempt(id)).as("build %d", id).isEqualTo(1);
      assertThat(
              far.admin
                  .batch()
                  .v1()
                  .jobs()
                  .inAnyNamespace()
                  .withLabel("oneshot.io/build", Long.toString(id))
                  .list()
                  .getItems())
          .hasSize(1);
      assertThat(Sql.logLines(id, "stdout").stream().filter(l -> l.startsWith("away-")))
          .as("build %d ran once", id)
          .hasSize(1);
    }
  }

  /**
   * A cluster that refuses the dispatcher's credential (revoked) stalls its routes and says so; the
   * new credential written to its kubeconfig is picked up without a restart, and its builds run,
   * once, there.
   */
  @Test
  void aRevokedCredentialStallsItsClusterUntilANewOneIsWrittenToItsKubeconfig() throws IOException {
    MockCluster home = cluster("home", "team-a");
    MockCluster far = cluster("far", "team-far");
    TcpProxy toFar = proxyTo(far);
    Path kubeconfig = kubeconfig(toFar, "old-token");
    t =
        server(
                """
                clusters:
                  - {name: far, kubeconfig: %s, namespace: team-far}
                routes:
                  - {name: near, tags: {at: near}, template: script.yaml, namespace: team-a}
                  - {name: away, tags: {at: far}, template: script.yaml, cluster: far, launchTimeout: 3s, maxAttempts: 1}
                """
                    .formatted(kubeconfig),
                homeAndFar(home))
            .start();
    long before = t.api.submitScript("{\"at\": \"far\"}", "echo before");
    assertThat(awaitEnd(before)).isEqualTo("succeeded");
    far.dispatcher.revoke("old-token");
    long refused = t.api.submitScript("{\"at\": \"far\"}", "echo refused");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> cluster("far").path("trouble").asText(""), r -> r.contains("401"));
    long waiting = t.api.submitScript("{\"at\": \"far\"}", "echo waiting");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> reason(waiting),
            r -> r.contains("cluster far") && r.contains("refuses the dispatcher's credentials"));
    long near = t.api.submitScript("{\"at\": \"near\"}", "echo near");
    assertThat(awaitEnd(near)).as("the other cluster runs on").isEqualTo("succeeded");
    assertThat(List.of(status(refused), status(waiting))).doesNotContain("failed");
    // The new kubeconfig has a new token and names the API at a new address (fabric8 reads a
    // kubeconfig's token again by itself on a 401; anything else in it needs the new client).
    Path fresh = kubeconfig(proxyTo(far), "new-token");
    toFar.cut();
    Path next = tmp.resolve("next.kubeconfig");
    Files.copy(fresh, next);
    Files.move(
        next,
        kubeconfig,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    assertThat(awaitEnd(refused)).isEqualTo("succeeded");
    assertThat(awaitEnd(waiting)).isEqualTo("succeeded");
    assertThat(attempt(refused)).isEqualTo(1);
    assertThat(attempt(waiting)).isEqualTo(1);
    await().atMost(30, TimeUnit.SECONDS).until(() -> cluster("far").path("ready").asBoolean());
    for (long id : List.of(before, refused, waiting)) {
      assertThat(
              far.admin
                  .batch()
                  .v1()
                  .jobs()
                  .inAnyNamespace()
                  .withLabel("oneshot.io/build", Long.toString(id))
                  .list()
                  .getItems())
          .as("build %d's Job in its cluster", id)
          .hasSize(1);
    }
  }

  /**
   * A kubeconfig whose user names a {@code tokenFile} (a projected token, or a rotator's file): the
   * dispatcher sends the file's token (the Kubernetes client itself would send none), and a new
   * token written to the file, the kubeconfig unchanged, is picked up without a restart.
   */
  @Test
  void aTokenFileItsKubeconfigNamesIsSentAndReadAgainWhenItChanges() throws IOException {
    MockCluster home = cluster("home", "team-a");
    MockCluster far = cluster("far", "team-far");
    TcpProxy toFar = proxyTo(far);
    Path token = tmp.resolve("far.token");
    Files.writeString(token, "token-1\n");
    Path kubeconfig = tmp.resolve("token-file.kubeconfig");
    Files.writeString(
        kubeconfig,
        """
        apiVersion: v1
        kind: Config
        clusters:
        - {name: far, cluster: {server: "http://127.0.0.1:%d"}}
        users:
        - {name: far, user: {tokenFile: far.token}}
        contexts:
        - {name: far, context: {cluster: far, user: far}}
        current-context: far
        """
            .formatted(toFar.port()));
    t =
        server(
                """
                clusters:
                  - {name: far, kubeconfig: %s, namespace: team-far}
                routes:
                  - {name: away, tags: {at: far}, template: script.yaml, cluster: far, launchTimeout: 3s, maxAttempts: 1}
                """
                    .formatted(kubeconfig),
                homeAndFar(home))
            .start();
    long first = t.api.submitScript("{\"at\": \"far\"}", "echo first");
    assertThat(awaitEnd(first)).isEqualTo("succeeded");
    // Refused only if it was the token sent.
    far.dispatcher.revoke("token-1");
    long second = t.api.submitScript("{\"at\": \"far\"}", "echo second");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> cluster("far").path("trouble").asText(""), r -> r.contains("401"));
    String before = Files.readString(kubeconfig);
    Path next = tmp.resolve("far.token.next");
    Files.writeString(next, "token-2\n");
    Files.move(
        next,
        token,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    assertThat(awaitEnd(second)).isEqualTo("succeeded");
    assertThat(attempt(second)).isEqualTo(1);
    assertThat(Files.readString(kubeconfig)).isEqualTo(before);
    await().atMost(30, TimeUnit.SECONDS).until(() -> cluster("far").path("ready").asBoolean());
  }

  /**
   * The dispatcher starts again while a build runs in a cluster it cannot reach yet: the build's
   * runner calls are answered "try again" (not refused, which would end the build) until the
   * cluster is watched, then proven; the build ends as its script decided, run once.
   */
  @Test
  void aRunnerOfAClusterNotWatchedYetIsToldToTryAgainNotRefused() throws IOException {
    MockCluster home = cluster("home", "team-a");
    MockCluster far = cluster("far", "team-far");
    TcpProxy toFar = proxyTo(far);
    Path kubeconfig = kubeconfig(toFar);
    String routes =
        """
        clusters:
          - {name: far, kubeconfig: %s, namespace: team-far}
        routes:
          - {name: near, tags: {at: near}, template: script.yaml, namespace: team-a}
          - {name: away, tags: {at: far}, template: script.yaml, cluster: far}
        """
            .formatted(kubeconfig);
    Connect connect = homeAndFar(home);
    int port = Ports.stable();
    t = server(routes, connect, port, null).start();
    long id =
        t.api.submitScript(
            "{\"at\": \"far\"}",
            "echo started; for i in 1 2 3 4 5 6 7 8; do sleep 1; done; echo done");
    await()
        .atMost(60, TimeUnit.SECONDS)
        .until(() -> Sql.logLines(id, "stdout").contains("started"));
    t.close();
    toFar.cut();
    t = server(routes, connect, port, null).keepQueue().start();
    assertThat(cluster("far").path("trouble").asText()).startsWith("not started");
    // Its runner's calls meanwhile are answered 503 and tried again; none refused.
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () ->
                PromText.parse(t.api.get("/metrics").text())
                        .sum("oneshot_api_requests_total", "code", "503")
                    > 0);
    toFar.restore();
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    assertThat(attempt(id)).isEqualTo(1);
    assertThat(Sql.logLines(id, "stdout").stream().filter(l -> l.equals("started"))).hasSize(1);
    assertThat(Sql.logLines(id, "stdout")).contains("done");
  }
}
