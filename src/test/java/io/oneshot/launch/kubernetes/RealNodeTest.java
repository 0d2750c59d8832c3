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
        TestServer.with()
            .api(
                "{listen: \"127.0.0.1:%d\", publicUrl: \"http://127.0.0.1:%d\", adminToken: \"%s\"}"
                    .formatted(port, port, TestServer.ADMIN_TOKEN))
            .launcherYaml(
                "{kind: kubernetes, kubernetes: {namespace: %s, templateDir: %s, ttlSecondsAfterFinished: 600}}"
                    .formatted(ns, dir))
            .dispatch(
                "maxConcurrent: 6, pollInterval: 200ms, rescueInterval: 300ms, heartbeatInterval: 300ms")
            .routes(routes)
            .launchers(
                (vertx, cfg) -> {
                  try {
                    Config c = Config.fromKubeconfig(Files.readString(k.kubeconfig));
                    return KubernetesLauncher.create(cfg, KubernetesLauncher.client(vertx, c, cfg));
                  } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                  }
                })
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
              "{\"team\": \"a\"}", "echo from-pod-" + i + "; exit " + (i == 2 ? 3 : 0)));
    }
    for (int i = 0; i < 3; i++) {
      long id = ids.get(i);
      assertThat(awaitEnd(id)).as("build %d", id).isEqualTo(i == 2 ? "failed" : "succeeded");
      assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
      assertThat(jobsOf(id)).as("one Job per build").hasSize(1);
      assertThat(podsOf(id)).as("one pod per build").hasSize(1);
      String logs = k.kubectl("logs", "-n", ns, "job/oneshot-" + id + "-1");
      assertThat(logs).contains("from-pod-" + i);
    }
  }
}
