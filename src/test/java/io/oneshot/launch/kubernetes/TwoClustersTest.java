package io.oneshot.launch.kubernetes;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.client.Config;
import io.oneshot.testing.Ports;
import io.oneshot.testing.PromText;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.FakeKubelet;
import io.oneshot.testing.k8s.RealCluster;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One dispatcher, two real API servers on loopback: the real node's ({@code scripts/kube start},
 * the dispatcher's own, {@code home}) and a second control plane without a node ({@code
 * scripts/kube second start}; the test kubelet serves its Jobs, on the real API server), reached
 * through a kubeconfig file with the token of the ServiceAccount the chart makes there, holding the
 * chart's Role and nothing more. Routes in each; bursts split across both; the second's API server
 * stopped for over a minute mid-burst (longer than its route's launch timeout) and started again;
 * its credential revoked and a new one written to the kubeconfig; and, with two replicas, the
 * leader gone while the far cluster is away. Every build is audited: one Job, in its route's
 * cluster and nowhere else, its script run once, on its first attempt.
 */
class TwoClustersTest {
  @TempDir Path tmp;
  private RealCluster home;
  private RealCluster two;
  private String homeNs;
  private String twoNs;
  private FakeKubelet kubelet;
  private TestServer t;
  private int port;
  private Path kubeconfig;
  private Path templates;

  /** Replicas besides {@link #t}, and the Service in front of them, closed after the test. */
  private final List<AutoCloseable> closing = new ArrayList<>();

  @BeforeEach
  void setUp() {
    home = RealCluster.get();
    two = RealCluster.second();
    homeNs = home.namespace("two-home");
    // The chart makes the build pods' account there, as in any namespace it is given.
    twoNs = two.bareNamespace("two-far");
    port = Ports.stable();
  }

  /** Whether the far API server is stopped (the next test needs it started again). */
  private boolean farStopped;

  @AfterEach
  void tearDown() throws Exception {
    try {
      if (farStopped) {
        two.startApi();
      }
      if (t != null) {
        t.close();
      }
      for (AutoCloseable c : closing) {
        c.close();
      }
    } finally {
      try {
        if (kubelet != null) {
          kubelet.close();
        }
      } finally {
        home.delete(homeNs);
        two.delete(twoNs);
      }
    }
  }

  private static final String ROUTES =
      """
      clusters:
        - {name: far, kubeconfig: %s, namespace: %s}
      routes:
        - {name: near, tags: {at: near}, template: script.yaml, maxConcurrent: 3, maxAttempts: 3}
        - {name: away, tags: {at: far}, template: script.yaml, cluster: far, maxConcurrent: 3, maxAttempts: 3, launchTimeout: 20s}
      """;

  /**
   * The token of a new Secret of the ServiceAccount's, once the token controller filled it in: what
   * a cluster's operator hands the dispatcher, and revokes by deleting the Secret.
   */
  private String newToken(String name) {
    two.admin
        .secrets()
        .inNamespace(twoNs)
        .resource(
            new SecretBuilder()
                .withNewMetadata()
                .withName(name)
                .withAnnotations(Map.of("kubernetes.io/service-account.name", "oneshot"))
                .endMetadata()
                .withType("kubernetes.io/service-account-token")
                .build())
        .create();
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> {
              Secret s = two.admin.secrets().inNamespace(twoNs).withName(name).get();
              return s != null && s.getData() != null && s.getData().containsKey("token");
            });
    return new String(
        Base64.getDecoder()
            .decode(
                two.admin.secrets().inNamespace(twoNs).withName(name).get().getData().get("token")),
        StandardCharsets.UTF_8);
  }

  /** Writes the far cluster's kubeconfig with {@code token}. */
  private void writeKubeconfig(String token) throws IOException {
    writeKubeconfigFor("{token: \"%s\"}".formatted(token));
  }

  /**
   * Writes the far cluster's kubeconfig at {@link #kubeconfig}, its user's credentials {@code user}
   * (a YAML mapping), whole at once (as a Secret's is).
   */
  private void writeKubeconfigFor(String user) throws IOException {
    Config admin = Config.fromKubeconfig(Files.readString(two.kubeconfig));
    String yaml =
        """
        apiVersion: v1
        kind: Config
        clusters:
        - name: far
          cluster: {server: "%s", certificate-authority: "%s"}
        users:
        - name: oneshot
          user: %s
        contexts:
        - name: far
          context: {cluster: far, user: oneshot, namespace: %s}
        current-context: far
        """
            .formatted(admin.getMasterUrl(), admin.getCaCertFile(), user, twoNs);
    Path next = kubeconfig.resolveSibling("kubeconfig.next");
    Files.writeString(next, yaml);
    Files.move(
        next, kubeconfig, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
  }

  /**
   * The chart in the far cluster, no dispatcher of its own (its ServiceAccount and Role there), and
   * the far kubeconfig with a token of that account.
   */
  private void farAccount() throws Exception {
    new com.marcnuri.helm.Helm(io.oneshot.testing.Chart.DIR)
        .install()
        .withName("oneshot")
        .withNamespace(twoNs)
        .withKubeConfig(two.kubeconfig)
        .set("replicaCount", 0)
        .call();
    kubeconfig = tmp.resolve("far.kubeconfig");
    writeKubeconfig(newToken("oneshot-token-1"));
  }

  private void start() throws Exception {
    start(ROUTES);
  }

  private void start(String routes) throws Exception {
    prepare();
    t = replica(routes, port, null).start();
  }

  /** The far cluster's account and kubeconfig, the test kubelet there, and the Job templates. */
  private void prepare() throws Exception {
    farAccount();
    kubelet = FakeKubelet.onRealApi(two.admin, List.of(twoNs), tmp.resolve("kubelet"));
    templates = home.templates(tmp.resolve("templates"), UnaryOperator.identity());
  }

  /**
   * A dispatcher replica on {@code port}, launching into both clusters as the dispatcher does; its
   * pods call it at {@code publicUrl} (null: that port).
   */
  private TestServer.Builder replica(String routes, int port, String publicUrl) throws IOException {
    Config homeAdmin = Config.fromKubeconfig(Files.readString(home.kubeconfig));
    TestServer.Builder b =
        home.server(homeNs, templates, port, "ttlSecondsAfterFinished: 600")
            .dispatch(
                "maxConcurrent: 6, pollInterval: 200ms, rescueInterval: 300ms,"
                    + " heartbeatInterval: 300ms, warmInterval: 1s, leaderInterval: 500ms")
            .routes(routes.formatted(kubeconfig, twoNs))
            .launchers(
                (vertx, cfg) ->
                    new Clusters(
                        cfg,
                        c ->
                            KubernetesLauncher.create(
                                cfg,
                                c,
                                KubernetesLauncher.client(
                                    vertx,
                                    c.name().equals("home") ? homeAdmin : Clusters.clientConfig(c),
                                    c.requestTimeout()))));
    if (publicUrl != null) {
      b.api(
          "{listen: \"127.0.0.1:%d\", publicUrl: \"%s\", adminToken: \"%s\"}"
              .formatted(port, publicUrl, TestServer.ADMIN_TOKEN));
    }
    return b;
  }

  private long submit(String at, String marker) {
    return t.api.submitScript("{\"at\": \"" + at + "\"}", script(marker));
  }

  private static String awaitEnd(long id) {
    await()
        .atMost(4, TimeUnit.MINUTES)
        .until(() -> List.of("succeeded", "failed", "canceled").contains(status(id)));
    return status(id);
  }

  private JsonNode clusterOnReadyz(String name) {
    return t.api.get("/readyz").json().path("clusters").path(name);
  }

  /** The build's Jobs in this test's namespace of the cluster (others hold earlier tests'). */
  private List<Job> jobs(RealCluster c, long build) {
    return c.admin
        .batch()
        .v1()
        .jobs()
        .inNamespace(c == home ? homeNs : twoNs)
        .withLabel("oneshot.io/build", Long.toString(build))
        .list()
        .getItems();
  }

  @Test
  void eachRouteLaunchesIntoItsClusterThroughAnOutageAndACredentialRotation() throws Exception {
    start();
    assertThat(clusterOnReadyz("far").path("ready").asBoolean()).isTrue();
    assertThat(clusterOnReadyz("home").path("ready").asBoolean()).isTrue();
    List<Long> near = new ArrayList<>();
    List<Long> away = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      near.add(submit("near", "near-" + i));
      away.add(submit("far", "far-" + i));
    }
    // Mid-burst: the far API server stops; builds keep coming for both.
    await().atMost(2, TimeUnit.MINUTES).until(() -> status(away.get(0)).equals("running"));
    farStopped = true;
    two.stopApi();
    long stoppedAt = System.nanoTime();
    for (int i = 4; i < 8; i++) {
      near.add(submit("near", "near-" + i));
      away.add(submit("far", "far-" + i));
    }
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(() -> !clusterOnReadyz("far").path("ready").asBoolean(true));
    assertThat(clusterOnReadyz("far").path("trouble").asText()).contains("cannot reach");
    assertThat(clusterOnReadyz("far").path("stalledRoutes").toString()).contains("away");
    assertThat(t.api.get("/readyz").status()).as("one cluster's trouble is its own").isEqualTo(200);
    // A far build still queued says why it waits.
    long last = away.get(away.size() - 1);
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () -> t.api.get("/api/v1/builds/" + last).json().path("reason").asText(""),
            r -> r.contains("cluster far") && r.contains("cannot reach"));
    assertThat(
            PromText.parse(t.api.get("/metrics").text())
                .value("oneshot_cluster_ready", "cluster", "far"))
        .isEqualTo(0.0);
    // Down for over a minute: longer than the far route's launch timeout.
    nearRunsOnFarComesBack(near, away, stoppedAt, 65);

    // The credential is revoked: the cluster refuses the dispatcher, the route stalls and says so.
    two.admin.secrets().inNamespace(twoNs).withName("oneshot-token-1").delete();
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(() -> clusterOnReadyz("far").path("trouble").asText(""), r -> r.contains("401"));
    List<Long> rotated = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      rotated.add(submit("far", "rotated-" + i));
    }
    long waiting = rotated.get(2);
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () -> t.api.get("/api/v1/builds/" + waiting).json().path("reason").asText(""),
            r -> r.contains("cluster far") && r.contains("401"));
    // A new one is written to the kubeconfig: picked up without a restart.
    writeKubeconfig(newToken("oneshot-token-2"));
    for (long id : rotated) {
      assertThat(awaitEnd(id)).as("build %d after the rotation", id).isEqualTo("succeeded");
    }
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(() -> clusterOnReadyz("far").path("ready").asBoolean());

    List<Long> all = new ArrayList<>(near);
    all.addAll(away);
    all.addAll(rotated);
    audit(near, all);
  }

  /**
   * The near route's builds run to the end while the far API server is away; it stays away for
   * {@code seconds} since {@code stoppedAt} (past the far route's launch timeout), nothing of the
   * far route failing meanwhile; then it answers again, each far build runs, and the cluster is
   * ready.
   */
  private void nearRunsOnFarComesBack(
      List<Long> near, List<Long> away, long stoppedAt, int seconds) {
    for (long id : near) {
      assertThat(awaitEnd(id)).as("near build %d", id).isEqualTo("succeeded");
    }
    await()
        .atMost(seconds + 60, TimeUnit.SECONDS)
        .pollInterval(Duration.ofSeconds(1))
        .until(() -> System.nanoTime() - stoppedAt > TimeUnit.SECONDS.toNanos(seconds));
    assertThat(away.stream().map(id -> status(id)))
        .as("nothing of the far route failed while its cluster was away")
        .doesNotContain("failed", "canceled");
    two.startApi();
    farStopped = false;
    for (long id : away) {
      assertThat(awaitEnd(id)).as("far build %d", id).isEqualTo("succeeded");
    }
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(() -> clusterOnReadyz("far").path("ready").asBoolean());
  }

  /**
   * The audit: each build one Job, made in its route's cluster alone (the launch says where; the
   * rescuer may since have removed a finished build's Job whose end its cluster never heard of),
   * none in the other; run once, on its first attempt.
   */
  private void audit(List<Long> near, List<Long> all) {
    for (long id : all) {
      boolean far = !near.contains(id);
      assertThat(Sql.count("SELECT count(*) FROM oneshot.build_launches WHERE build_id = ?", id))
          .as("build %d's launches", id)
          .isEqualTo(1);
      assertThat(
              Sql.count(
                  "SELECT count(*) FROM oneshot.build_events WHERE build_id = ?"
                      + " AND reason LIKE ?",
                  id,
                  "%launched Job "
                      + (far ? twoNs : homeNs)
                      + "/oneshot-"
                      + id
                      + "-1 created in"
                      + " cluster "
                      + (far ? "far" : "home")))
          .as("build %d launched in its cluster", id)
          .isEqualTo(1);
      assertThat(jobs(far ? two : home, id))
          .as("build %d's Jobs in its cluster", id)
          .hasSizeLessThanOrEqualTo(1);
      assertThat(jobs(far ? home : two, id)).as("build %d's Jobs in the other", id).isEmpty();
      assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id))
          .as("build %d's attempts", id)
          .isEqualTo(1);
      List<String> out = Sql.logLines(id, "stdout");
      assertThat(out.stream().filter(l -> l.startsWith("done-"))).as("build %d ran", id).hasSize(1);
    }
  }

  /**
   * Two replicas behind one Service; the far API server stops mid-burst and the leader goes while
   * it is away, longer than the far route's launch timeout: the new leader keeps the far route
   * stalled and says so, runs the near route on, and launches the far builds once their cluster
   * answers; builds that were running when the leader went finish through the other replica.
   */
  @Test
  void aFailoverWhileOneClusterIsAwayLosesNothingAndRunsNothingTwice() throws Exception {
    prepare();
    int firstPort = port;
    int secondPort = Ports.stable();
    // The Service in front of both replicas: pods reach whichever answers.
    io.oneshot.testing.TcpProxy service =
        new io.oneshot.testing.TcpProxy(
            List.of(
                new java.net.InetSocketAddress("127.0.0.1", firstPort),
                new java.net.InetSocketAddress("127.0.0.1", secondPort)));
    closing.add(service);
    String url = "http://127.0.0.1:" + service.port();
    TestServer first = replica(ROUTES, firstPort, url).start();
    closing.add(0, first);
    await().atMost(30, TimeUnit.SECONDS).until(first.server::leader);
    t = replica(ROUTES, secondPort, url).keepQueue().start();
    TestServer second = t;
    assertThat(second.server.leader()).isFalse();

    List<Long> near = new ArrayList<>();
    List<Long> away = new ArrayList<>();
    // The first builds run long enough to be running when the leader goes.
    for (int i = 0; i < 3; i++) {
      near.add(first.api.submitScript("{\"at\": \"near\"}", script("near-" + i, 25)));
      away.add(first.api.submitScript("{\"at\": \"far\"}", script("far-" + i, 25)));
    }
    await().atMost(2, TimeUnit.MINUTES).until(() -> status(away.get(0)).equals("running"));
    farStopped = true;
    two.stopApi();
    long stoppedAt = System.nanoTime();
    for (int i = 3; i < 6; i++) {
      near.add(second.api.submitScript("{\"at\": \"near\"}", script("near-" + i)));
      away.add(second.api.submitScript("{\"at\": \"far\"}", script("far-" + i)));
    }
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () -> Sql.value("SELECT stalled FROM oneshot.routes WHERE name = 'away'"),
            v -> v != null && v.toString().contains("cannot reach"));

    // The leader goes while the far cluster is away and builds of both routes run or wait.
    assertThat(near.subList(0, 3).stream().map(id -> status(id))).contains("running");
    assertThat(away.subList(0, 3).stream().map(id -> status(id))).contains("running");
    first.close();
    closing.remove(first);
    await().atMost(1, TimeUnit.MINUTES).until(second.server::leader);
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(() -> !clusterOnReadyz("far").path("ready").asBoolean(true));
    assertThat(clusterOnReadyz("far").path("stalledRoutes").toString()).contains("away");
    for (int i = 6; i < 8; i++) {
      near.add(second.api.submitScript("{\"at\": \"near\"}", script("near-" + i)));
      away.add(second.api.submitScript("{\"at\": \"far\"}", script("far-" + i)));
    }
    long last = away.get(away.size() - 1);
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () -> second.api.get("/api/v1/builds/" + last).json().path("reason").asText(""),
            r -> r.contains("cluster far") && r.contains("cannot reach"));
    // Away for longer than the far route's launch timeout (20 s) before it answers again.
    nearRunsOnFarComesBack(near, away, stoppedAt, 30);
    List<Long> all = new ArrayList<>(near);
    all.addAll(away);
    audit(near, all);
  }

  private static String script(String marker) {
    return script(marker, 2);
  }

  private static String script(String marker, int seconds) {
    return "echo " + marker + "; sleep " + seconds + "; echo done-" + marker;
  }

  /**
   * A kubeconfig that names its client certificate and key files, mounted beside it (as a Secret
   * cert-manager keeps is): each certificate and key written to those files, the kubeconfig itself
   * unchanged, is picked up without a restart. First one the cluster does not trust, then one of a
   * user bound to the chart's Role alone (the TokenReview a build pod's proof needs is missing),
   * then, the launcher running, a rotation to another user's as the first loses its bindings.
   */
  @Test
  void clientCertificatesRotatedBesideAnUnchangedKubeconfigArePickedUp() throws Exception {
    prepare();
    Path certs = Files.createDirectories(tmp.resolve("certs"));
    // What the cluster does not trust: a certificate of a CA of nobody's.
    openssl(
        certs,
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "stranger.key",
        "-out",
        "stranger.crt",
        "-subj",
        "/CN=stranger",
        "-days",
        "1");
    Path ca = two.state.resolve("pki/ca.crt");
    Path caKey = two.state.resolve("pki/ca.key");
    clientCert(
        certs,
        "untrusted",
        "oneshot-far",
        certs.resolve("stranger.crt"),
        certs.resolve("stranger.key"));
    clientCert(certs, "first", "oneshot-far", ca, caKey);
    clientCert(certs, "second", "oneshot-far-2", ca, caKey);
    bind("oneshot-far", false);
    Path far = Files.createDirectories(tmp.resolve("far"));
    rotate(certs, "untrusted", far);
    kubeconfig = far.resolve("kubeconfig");
    writeKubeconfigFor("{client-certificate: client.crt, client-key: client.key}");
    String before = Files.readString(kubeconfig);
    t = replica(ROUTES, port, null).start();
    try {
      // The TLS client does not offer a certificate of a CA the server does not name: the API
      // server, which allows anonymous requests by default, takes the dispatcher for nobody.
      await()
          .atMost(1, TimeUnit.MINUTES)
          .until(
              () -> clusterOnReadyz("far").path("trouble").asText(""),
              r -> r.contains("takes the dispatcher for system:anonymous"));
      long id = submit("far", "first-cert");
      await()
          .atMost(1, TimeUnit.MINUTES)
          .until(
              () -> t.api.get("/api/v1/builds/" + id).json().path("reason").asText(""),
              r -> r.contains("cluster far") && r.contains("system:anonymous"));

      rotate(certs, "first", far);
      // Taken now, as a user the chart's Role is bound to; the chart binds its ClusterRole (the
      // TokenReview a build pod's proof needs) to its own account alone: the route stays
      // stalled, and says why, rather than launch a build that could not prove who it is.
      await()
          .atMost(1, TimeUnit.MINUTES)
          .until(
              () -> clusterOnReadyz("far").path("trouble").asText(""),
              r -> r.contains("may not create tokenreviews.authentication.k8s.io"));
      assertThat(status(id)).isEqualTo("pending");
      bind("oneshot-far", true);
      assertThat(awaitEnd(id)).isEqualTo("succeeded");

      // Rotated while its launcher runs: the next user is bound, the files change, the first
      // user loses its bindings; the next build runs, as the next user.
      bind("oneshot-far-2", false);
      bind("oneshot-far-2", true);
      rotate(certs, "second", far);
      unbind("oneshot-far");
      long next = submit("far", "second-cert");
      assertThat(awaitEnd(next)).isEqualTo("succeeded");
      assertThat(Files.readString(kubeconfig)).isEqualTo(before);
      audit(List.of(), List.of(id, next));
    } finally {
      unbind("oneshot-far");
      unbind("oneshot-far-2");
    }
  }

  /**
   * Binds {@code user} in the far cluster to the chart's Role there, or ({@code clusterWide}) to
   * its ClusterRole for the TokenReview.
   */
  private void bind(String user, boolean clusterWide) {
    var subject =
        new io.fabric8.kubernetes.api.model.rbac.SubjectBuilder()
            .withApiGroup("rbac.authorization.k8s.io")
            .withKind("User")
            .withName(user)
            .build();
    if (!clusterWide) {
      two.admin
          .rbac()
          .roleBindings()
          .inNamespace(twoNs)
          .resource(
              new io.fabric8.kubernetes.api.model.rbac.RoleBindingBuilder()
                  .withNewMetadata()
                  .withName(user)
                  .endMetadata()
                  .withNewRoleRef("rbac.authorization.k8s.io", "Role", "oneshot-dispatcher")
                  .withSubjects(subject)
                  .build())
          .create();
      return;
    }
    String review =
        two.admin.rbac().clusterRoles().list().getItems().stream()
            .map(r -> r.getMetadata().getName())
            .filter(n -> n.contains(twoNs) && n.endsWith("-runner-review"))
            .findFirst()
            .orElseThrow();
    two.admin
        .rbac()
        .clusterRoleBindings()
        .resource(
            new io.fabric8.kubernetes.api.model.rbac.ClusterRoleBindingBuilder()
                .withNewMetadata()
                .withName(twoNs + "-" + user)
                .endMetadata()
                .withNewRoleRef("rbac.authorization.k8s.io", "ClusterRole", review)
                .withSubjects(subject)
                .build())
        .create();
  }

  /** Removes what {@link #bind} made for {@code user}. */
  private void unbind(String user) {
    two.admin.rbac().roleBindings().inNamespace(twoNs).withName(user).delete();
    two.admin.rbac().clusterRoleBindings().withName(twoNs + "-" + user).delete();
  }

  /**
   * Writes {@code name}'s key and certificate to {@code dir}'s client files, each whole at once.
   */
  private static void rotate(Path certs, String name, Path dir) throws IOException {
    for (String f : List.of("key", "crt")) {
      Path next = dir.resolve("client." + f + ".next");
      Files.copy(certs.resolve(name + "." + f), next, StandardCopyOption.REPLACE_EXISTING);
      Files.move(
          next,
          dir.resolve("client." + f),
          StandardCopyOption.ATOMIC_MOVE,
          StandardCopyOption.REPLACE_EXISTING);
    }
  }

  /** Runs {@code openssl} in {@code dir}; it must succeed. */
  private static void openssl(Path dir, String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of("openssl"));
    command.addAll(List.of(args));
    Process p =
        new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor()).as(String.join(" ", command) + "\n" + out).isZero();
  }

  /** A key and a certificate for {@code user} signed by {@code ca}: {@code name}.key/crt. */
  private static void clientCert(Path dir, String name, String user, Path ca, Path caKey)
      throws Exception {
    openssl(
        dir,
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        name + ".key",
        "-out",
        name + ".csr",
        "-subj",
        "/CN=" + user);
    openssl(
        dir,
        "x509",
        "-req",
        "-in",
        name + ".csr",
        "-CA",
        ca.toString(),
        "-CAkey",
        caKey.toString(),
        "-set_serial",
        Long.toString(System.nanoTime()),
        "-days",
        "1",
        "-out",
        name + ".crt");
  }

  /**
   * {@code oneshot dispatcher --check --reach} looks at each cluster as the dispatcher would: one
   * that answers and allows what a launch makes is ok; one whose account may not make Jobs in the
   * route's namespace, and one whose kubeconfig is not there, are problems, each said (exit 3).
   */
  @Test
  void checkReachesEachClusterAsTheDispatcherWould() throws Exception {
    farAccount();
    Path config = tmp.resolve("oneshot.yaml");
    Files.writeString(
        config,
        """
        api: {listen: "127.0.0.1:0", publicUrl: "http://127.0.0.1:8080", adminToken: "%s"}
        launcher: {kind: kubernetes, kubernetes: {namespace: %s, templateDir: %s}}
        clusters:
          - {name: near, kubeconfig: %s}
          - {name: far, kubeconfig: %s, namespace: %s}
          - {name: denied, kubeconfig: %s, namespace: default}
          - {name: gone, kubeconfig: %s}
        routes:
          - {name: r-near, tags: {at: near}, template: script.yaml, cluster: near}
          - {name: r-far, tags: {at: far}, template: script.yaml, cluster: far}
          - {name: r-denied, tags: {at: denied}, template: script.yaml, cluster: denied}
          - {name: r-gone, tags: {at: gone}, template: script.yaml, cluster: gone}
        """
            .formatted(
                TestServer.ADMIN_TOKEN,
                homeNs,
                Path.of("job-templates").toAbsolutePath(),
                home.kubeconfig,
                kubeconfig,
                twoNs,
                kubeconfig,
                tmp.resolve("missing.kubeconfig")));
    java.io.StringWriter out = new java.io.StringWriter();
    java.io.StringWriter err = new java.io.StringWriter();
    int code =
        io.oneshot.cli.Main.commandLine(
                new java.io.PrintWriter(out, true), new java.io.PrintWriter(err, true))
            .execute("dispatcher", "--config", config.toString(), "--check", "--reach");
    assertThat(code).as(out + "\n" + err).isEqualTo(3);
    Map<String, String> state = new java.util.HashMap<>();
    for (String line : out.toString().split("\n")) {
      String[] cells = line.trim().split("\\s{2,}");
      if (cells.length == 5 && List.of("near", "far", "denied", "gone").contains(cells[0])) {
        state.put(cells[0], cells[4]);
      }
    }
    assertThat(state.get("near")).as(out.toString()).isEqualTo("ok");
    assertThat(state.get("far")).as(out.toString()).isEqualTo("ok");
    assertThat(state.get("denied"))
        .as(out.toString())
        .contains("may not create jobs.batch in namespace default");
    assertThat(state.get("gone")).as(out.toString()).contains("cannot read");
    assertThat(err.toString()).contains("cannot be used now");
  }

  /**
   * A route's balloons are kept in its own cluster (the Deployment there, none in the other), and a
   * build's own pod settings reach its Job in its route's cluster.
   */
  @Test
  void balloonsAndPodSettingsGoToTheRoutesCluster() throws Exception {
    two.balloonClass();
    start(
        """
        clusters:
          - {name: far, kubeconfig: %s, namespace: %s}
        routes:
          - {name: near, tags: {at: near}, template: script.yaml, maxConcurrent: 3}
          - name: away
            tags: {at: far}
            template: script.yaml
            cluster: far
            maxConcurrent: 3
            warm: {idle: 2}
            pod: {maxRequests: {cpu: "1"}}
        """);
    await()
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () ->
                two.admin
                    .apps()
                    .deployments()
                    .inNamespace(twoNs)
                    .withName(BalloonFactory.name("away"))
                    .get(),
            d -> d != null && Integer.valueOf(2).equals(d.getSpec().getReplicas()));
    assertThat(
            home.admin
                .apps()
                .deployments()
                .inNamespace(homeNs)
                .withLabel(BalloonFactory.BALLOONS)
                .list()
                .getItems())
        .as("no balloon in the other cluster")
        .isEmpty();
    long id =
        t.api
            .post(
                "/api/v1/builds",
                "{\"tags\": {\"at\": \"far\"}, \"input\": {\"provisioner\": \"script\","
                    + " \"command\": [\"sh\", \"-c\", \"echo sized\"], \"pod\": {\"resources\":"
                    + " {\"requests\": {\"cpu\": \"250m\"}}}}}")
            .json()
            .path("id")
            .asLong();
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    Job job = jobs(two, id).get(0);
    assertThat(
            job.getSpec().getTemplate().getSpec().getContainers().stream()
                .filter(c -> c.getName().equals("provisionerd"))
                .findFirst()
                .orElseThrow()
                .getResources()
                .getRequests()
                .get("cpu")
                .toString())
        .isEqualTo("250m");
    assertThat(jobs(home, id)).isEmpty();
  }
}
