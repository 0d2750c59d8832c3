package io.oneshot.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.SecretBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.client.Watch;
import io.fabric8.kubernetes.client.Watcher;
import io.fabric8.kubernetes.client.WatcherException;
import io.oneshot.testing.k8s.MockCluster;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code scripts/bench --kubeconfig}: the launch scenario measured against an API server named by a
 * kubeconfig, as it would be against a real cluster. Here the server is fabric8's mock in CRUD mode
 * on loopback, reached only through the kubeconfig written for it.
 */
class RealApiBenchTest {
  private static final String NS = "bench-api";

  @TempDir Path dir;

  @Test
  void theLaunchScenarioMeasuresThroughTheKubeconfigWithSuspendedJobsAndLeavesNothingBehind()
      throws Exception {
    try (MockCluster c = Setups.cluster()) {
      List<Job> created = new CopyOnWriteArrayList<>();
      Watch watch = c.admin.batch().v1().jobs().inNamespace(NS).watch(added(created));
      try {
        // The mock deletes at once; a clean-up that leaves something is given up quickly here.
        RealApi real = new RealApi(kubeconfig(c), null, NS, 40, Duration.ofSeconds(5));
        Bench.Result r;
        try {
          r = Bench.run(true, List.of("launch"), dir, real);
        } finally {
          real.close();
        }

        assertThat(r.failed()).isEmpty();
        String server = "API server at " + c.admin.getMasterUrl().toString().replaceAll("/$", "");
        List<Report.Figure> measured =
            r.report().figures().stream().filter(f -> f.variant().startsWith(server)).toList();
        assertThat(measured)
            .extracting(Report.Figure::metric)
            .contains(
                "plain fabric8 client, three requests: Secret, Job, owner patch",
                "plain fabric8 client, oneshot's two requests: Job, owned Secret",
                "oneshot, enqueue to launch recorded",
                "oneshot ÷ plain client, three requests",
                "20 builds enqueued at once: all launched in");
        assertThat(measured)
            .allSatisfy(f -> assertThat(f.value()).isFinite().isGreaterThanOrEqualTo(0));
        assertThat(measured)
            .filteredOn(f -> f.unit().equals("launches/s") || f.unit().equals("s"))
            .hasSize(4)
            .allSatisfy(f -> assertThat(f.value()).isPositive());
        // The server is not in this JVM: its CPU is not said to be counted in it.
        assertThat(measured)
            .extracting(Report.Figure::metric)
            .noneMatch(f -> f.contains("API server included"));

        // Three sides of 40 launches (the plain client's two recipes and the dispatcher), and the
        // burst of 20: every Job created suspended, so that no pod would run.
        Harness.await(
            "the watch saw every Job", Duration.ofSeconds(30), () -> created.size() >= 140);
        assertThat(created)
            .hasSize(140)
            .allSatisfy(j -> assertThat(j.getSpec().getSuspend()).isTrue());
        assertThat(created).extracting(j -> j.getMetadata().getNamespace()).containsOnly(NS);
        // Every run ends with what it made deleted: the namespace is as it was.
        assertThat(c.admin.batch().v1().jobs().inNamespace(NS).list().getItems()).isEmpty();
        assertThat(c.admin.secrets().inNamespace(NS).list().getItems()).isEmpty();
      } finally {
        watch.close();
      }
    }
  }

  @Test
  void aNamespaceHoldingWhatOneshotMakesIsRefusedBeforeAnythingRunsAndLeftAsItWas()
      throws Exception {
    try (MockCluster c = Setups.cluster()) {
      Secret theirs =
          new SecretBuilder()
              .withNewMetadata()
              .withName("oneshot-token-7-1")
              .withNamespace(NS)
              .withLabels(Map.of("app.kubernetes.io/managed-by", "oneshot"))
              .endMetadata()
              .withStringData(Map.of("token", "a live build's"))
              .build();
      c.admin.secrets().inNamespace(NS).resource(theirs).create();

      assertThatThrownBy(() -> new RealApi(kubeconfig(c), null, NS, 40))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("namespace " + NS + " already holds");
      StringWriter err = new StringWriter();
      int code =
          new CommandLine(new Bench())
              .setErr(new PrintWriter(err))
              .execute(
                  "--only",
                  "launch",
                  "--kubeconfig",
                  kubeconfig(c).toString(),
                  "--namespace",
                  NS,
                  "--out",
                  dir.toString());

      assertThat(code).isEqualTo(2);
      assertThat(err.toString())
          .contains("namespace " + NS + " already holds", "Secret/oneshot-token-7-1");
      assertThat(dir.resolve("bench.json")).doesNotExist();
      assertThat(c.admin.secrets().inNamespace(NS).withName("oneshot-token-7-1").get()).isNotNull();
    }
  }

  @Test
  void aKubeconfigIsRefusedWhenTheLaunchScenarioDoesNotRunOrTheFileIsMissing() {
    StringWriter err = new StringWriter();
    CommandLine cli = new CommandLine(new Bench()).setErr(new PrintWriter(err));
    assertThat(
            cli.execute(
                "--only",
                "peer",
                "--kubeconfig",
                dir.resolve("k").toString(),
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString()).contains("only the launch scenario uses it");

    assertThat(
            cli.execute(
                "--only",
                "launch",
                "--kubeconfig",
                dir.resolve("missing").toString(),
                "--out",
                dir.toString()))
        .isEqualTo(2);
    assertThat(err.toString()).contains("cannot read " + dir.resolve("missing"));
    assertThat(dir.resolve("bench.json")).doesNotExist();
  }

  /** A kubeconfig naming the mock API server, as one names a cluster. */
  private Path kubeconfig(MockCluster c) throws Exception {
    Path f = dir.resolve("kubeconfig");
    Files.writeString(
        f,
        """
        apiVersion: v1
        kind: Config
        clusters:
          - name: mock
            cluster: {server: "%s"}
        users:
          - name: bench
            user: {token: bench}
        contexts:
          - name: mock
            context: {cluster: mock, user: bench, namespace: default}
        current-context: mock
        """
            .formatted(c.admin.getMasterUrl()));
    return f;
  }

  private static Watcher<Job> added(List<Job> into) {
    return new Watcher<>() {
      @Override
      public void eventReceived(Action action, Job job) {
        if (action == Action.ADDED) {
          into.add(job);
        }
      }

      @Override
      public void onClose(WatcherException cause) {}
    };
  }
}
