package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The informers' two watches, Jobs and Pods, in either order: what a pod says is said once its Job
 * is known, whichever of the two was heard of first.
 */
class ClusterWatchTest {
  private static final String NS = "team-a";
  private static final String NAME = "oneshot-7-1";

  private KubernetesMockServer server;
  private KubernetesClient client;
  private ClusterWatch watch;
  private final List<String> said = new CopyOnWriteArrayList<>();

  @BeforeEach
  void start() {
    server =
        new KubernetesMockServer(
            new Context(),
            new MockWebServer(),
            new HashMap<>(),
            new KubernetesCrudDispatcher(),
            false);
    server.init();
    client = server.createClient();
    watch =
        new ClusterWatch(client, Set.of(NS), new ApiReachability(client.getMasterUrl().toString()));
    watch.events(
        new AttemptEvents() {
          @Override
          public void changed(AttemptRef ref) {}

          @Override
          public void note(AttemptRef ref, Note note) {
            said.add(ref.name() + ": " + note.text() + (note.waitReason() ? " [wait reason]" : ""));
          }

          @Override
          public void runsIn(AttemptRef ref, String where) {
            said.add(ref.name() + " runs in " + where);
          }
        });
    watch.start();
  }

  @AfterEach
  void stop() {
    watch.close();
    client.close();
    server.destroy();
  }

  private static Map<String, String> labels() {
    return Map.of(JobFactory.BUILD, "7", JobFactory.ATTEMPT, "1", "job-name", NAME);
  }

  private void createJob() {
    Job job =
        new JobBuilder()
            .withNewMetadata()
            .withName(NAME)
            .withNamespace(NS)
            .withLabels(labels())
            .endMetadata()
            .build();
    client.batch().v1().jobs().inNamespace(NS).resource(job).create();
  }

  /** A pod the scheduler has said it cannot place. */
  private void createUnschedulablePod(String annotation) {
    Pod pod =
        new PodBuilder()
            .withNewMetadata()
            .withName(NAME + "-abcde")
            .withNamespace(NS)
            .withLabels(labels())
            .withAnnotations(Map.of("seen", annotation))
            .endMetadata()
            .withNewStatus()
            .withPhase("Pending")
            .addNewCondition()
            .withType("PodScheduled")
            .withStatus("False")
            .withReason("Unschedulable")
            .withMessage("0/1 nodes are available: 1 node(s) didn't match node selector.")
            .endCondition()
            .endStatus()
            .build();
    client.pods().inNamespace(NS).resource(pod).createOr(p -> p.update());
  }

  private static final String UNSCHEDULABLE =
      NAME
          + ": pod "
          + NAME
          + "-abcde cannot be scheduled yet: Unschedulable: 0/1 nodes are available: 1 node(s)"
          + " didn't match node selector. [wait reason]";

  @Test
  void aPodHeardOfBeforeItsJobIsSaidWhenTheJobIs() {
    createUnschedulablePod("1");
    await().atMost(10, TimeUnit.SECONDS).until(() -> watch.cachedPod(NS, NAME + "-abcde") != null);
    assertThat(said).as("nothing said of a pod whose Job is not known").isEmpty();

    createJob();
    await().atMost(10, TimeUnit.SECONDS).until(() -> said.contains(UNSCHEDULABLE));
    assertThat(said).contains(NAME + " runs in " + NAME + "-abcde");

    // Heard of again, by the Job's watch and the pod's (each event handled in order, the last one
    // with a note of its own): nothing is said twice.
    client
        .batch()
        .v1()
        .jobs()
        .inNamespace(NS)
        .withName(NAME)
        .edit(
            j ->
                new JobBuilder(j)
                    .withNewStatus()
                    .addNewCondition()
                    .withType("Failed")
                    .withStatus("True")
                    .withReason("BackoffLimitExceeded")
                    .endCondition()
                    .endStatus()
                    .build());
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> said.contains(NAME + ": Job " + NAME + " failed: BackoffLimitExceeded"));
    createUnschedulablePod("2");
    client
        .pods()
        .inNamespace(NS)
        .withName(NAME + "-abcde")
        .edit(
            p -> {
              p.getStatus().getConditions().get(0).setStatus("True");
              return p;
            });
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> said.contains(NAME + ": pod " + NAME + "-abcde scheduled [wait reason]"));
    assertThat(said.stream().filter(UNSCHEDULABLE::equals).count()).isEqualTo(1);
    assertThat(said.stream().filter(x -> x.contains(" runs in ")).count()).isEqualTo(1);
  }

  @Test
  void aPodOfAKnownJobIsSaidAtOnce() {
    createJob();
    await().atMost(10, TimeUnit.SECONDS).until(() -> watch.cachedJob(NS, NAME) != null);
    createUnschedulablePod("1");
    await().atMost(10, TimeUnit.SECONDS).until(() -> said.contains(UNSCHEDULABLE));
    assertThat(said).containsExactly(NAME + " runs in " + NAME + "-abcde", UNSCHEDULABLE);
  }
}
