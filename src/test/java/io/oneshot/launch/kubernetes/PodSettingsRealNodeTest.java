package io.oneshot.launch.kubernetes;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.Quantity;
import io.oneshot.testing.Api;
import io.oneshot.testing.Ports;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.RealCluster;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A build's own pod settings on a real node ({@code scripts/kube start}): what only a kubelet can
 * show, a build that asked for too little memory killed for it and saying so, and the same build
 * rerun with more succeeding; and what the route refuses, refused at enqueue.
 */
class PodSettingsRealNodeTest {
  @TempDir Path tmp;
  private RealCluster k;
  private String ns;
  private TestServer t;

  @BeforeEach
  void setUp() throws IOException {
    k = RealCluster.get();
    ns = k.namespace("pod-settings");
    Path templates = k.templates(tmp.resolve("templates"), UnaryOperator.identity());
    int port = Ports.stable();
    t =
        k.server(ns, templates, port, "ttlSecondsAfterFinished: 600")
            .dispatch("pollInterval: 200ms, rescueInterval: 300ms, heartbeatInterval: 300ms")
            .routes(
                """
                routes:
                  - name: sized
                    tags: {team: a}
                    untagged: true
                    template: script.yaml
                    maxConcurrent: 4
                    pod:
                      maxRequests: {memory: 1Gi, cpu: "1"}
                      maxLimits: {memory: 1Gi, cpu: "1"}
                      images: ["%s"]
                      labels: {cost-center: ["*"]}
                """
                    .formatted(k.image()))
            .start();
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

  /**
   * A script that holds about 400 MiB at once (tail keeps its one line whole): at a 256Mi limit it
   * grows past provisionerd's JVM, so the kernel kills it, not the JVM.
   */
  private static final String HOG =
      "echo start; head -c 400m /dev/zero | tail -n 1 > /dev/null || exit 3; echo fit";

  private long submit(String pod) {
    return t.api
        .post(
            "/api/v1/builds",
            "{\"tags\": {\"team\": \"a\"}, \"input\": {\"provisioner\": \"script\", \"command\":"
                + " [\"sh\", \"-c\", "
                + io.oneshot.api.Json.write(HOG)
                + "], \"pod\": "
                + pod
                + "}}")
        .json()
        .path("id")
        .asLong();
  }

  private static String awaitEnd(long id) {
    await()
        .atMost(3, TimeUnit.MINUTES)
        .until(() -> List.of("succeeded", "failed", "canceled").contains(status(id)));
    return status(id);
  }

  private Pod podOf(long build) {
    return k.admin
        .pods()
        .inNamespace(ns)
        .withLabel("oneshot.io/build", Long.toString(build))
        .list()
        .getItems()
        .get(0);
  }

  @Test
  void aBuildThatAskedTooLittleMemoryIsKilledSaysSoAndItsRerunWithMoreSucceeds() {
    long id =
        submit(
            "{\"resources\": {\"requests\": {\"memory\": \"256Mi\"}, \"limits\": {\"memory\":"
                + " \"256Mi\"}}, \"labels\": {\"cost-center\": \"4711\"}}");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    // The pod had what the build asked for, on top of its template.
    Pod pod = podOf(id);
    assertThat(pod.getSpec().getContainers().get(0).getResources().getLimits().get("memory"))
        .isEqualTo(new Quantity("256Mi"));
    assertThat(pod.getMetadata().getLabels())
        .containsEntry("cost-center", "4711")
        .containsEntry("oneshot.io/build", Long.toString(id));
    String error = (String) Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id);
    assertThat(error)
        .contains("OOM killer killed")
        .contains("it hit its memory limit of 256 MiB (it asked for limits.memory 256Mi)")
        .contains("oneshot builds rerun " + id + " --memory 512Mi");
    Api.Response shown = t.api.get("/api/v1/builds/" + id);
    assertThat(shown.json().path("usage").path("oomKills").asInt()).isPositive();
    assertThat(shown.json().path("usage").path("memoryLimitBytes").asLong()).isEqualTo(256L << 20);
    assertThat(shown.json().path("pod").path("resources").path("limits").path("memory").asText())
        .isEqualTo("256Mi");

    // The rerun asks for more in one step, as the console's button and builds rerun --memory do.
    Api.Response rerun =
        t.api.post(
            "/api/v1/builds/" + id + "/rerun",
            "{\"pod\": {\"resources\": {\"requests\": {\"memory\": \"768Mi\"}, \"limits\":"
                + " {\"memory\": \"768Mi\"}}}}");
    assertThat(rerun.status()).as(rerun.text()).isEqualTo(201);
    long again = rerun.json().path("id").asLong();
    assertThat(awaitEnd(again)).isEqualTo("succeeded");
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text = 'fit'",
                again))
        .isEqualTo(1);
    assertThat(podOf(again).getSpec().getContainers().get(0).getResources().getLimits())
        .containsEntry("memory", new Quantity("768Mi"));
    assertThat(podOf(again).getMetadata().getLabels())
        .as("the rest of what it asked is kept")
        .containsEntry("cost-center", "4711");
  }

  @Test
  void whatTheRouteDoesNotAllowIsRefusedAtEnqueueWithNothingLaunched() {
    long before = Sql.count("SELECT count(*) FROM oneshot.builds");
    Api.Response image =
        t.api.post(
            "/api/v1/builds",
            "{\"tags\": {\"team\": \"a\"}, \"input\": {\"provisioner\": \"script\", \"command\":"
                + " [\"true\"], \"pod\": {\"image\": \"docker.io/library/busybox\"}}}");
    assertThat(image.status()).isEqualTo(400);
    assertThat(image.json().path("field").asText()).isEqualTo("input.pod.image");
    assertThat(image.json().path("error").asText())
        .isEqualTo("input.pod.image: docker.io/library/busybox is not an image route sized allows");
    Api.Response label =
        t.api.post(
            "/api/v1/builds",
            "{\"tags\": {\"team\": \"a\"}, \"input\": {\"provisioner\": \"script\", \"command\":"
                + " [\"true\"], \"pod\": {\"labels\": {\"oneshot.io/build\": \"1\"}}}}");
    assertThat(label.status()).isEqualTo(400);
    assertThat(label.json().path("error").asText())
        .startsWith("input.pod.labels.oneshot.io/build: the key oneshot.io/build is oneshot's own");
    // A size over the route's maximum is clamped, and says so.
    Api.Response big =
        t.api.post(
            "/api/v1/builds",
            "{\"tags\": {\"team\": \"a\"}, \"input\": {\"provisioner\": \"script\", \"command\":"
                + " [\"true\"], \"pod\": {\"resources\": {\"requests\": {\"cpu\": \"8\"}}}}}");
    assertThat(big.status()).isEqualTo(201);
    assertThat(big.json().path("notes").get(0).asText())
        .isEqualTo("requests.cpu 8 is over route sized's maximum: clamped to 1");
    long id = big.json().path("id").asLong();
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    assertThat(podOf(id).getSpec().getContainers().get(0).getResources().getRequests())
        .containsEntry("cpu", new Quantity("1"));
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isEqualTo(before + 1);
    assertThat(
            k.admin.batch().v1().jobs().inNamespace(ns).list().getItems().stream()
                .map(j -> j.getMetadata().getName())
                .toList())
        .containsExactly("oneshot-" + id + "-1");
  }
}
