package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.ContainerStatus;
import io.fabric8.kubernetes.api.model.ContainerStatusBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobBuilder;
import io.fabric8.kubernetes.api.model.batch.v1.JobCondition;
import io.fabric8.kubernetes.api.model.batch.v1.JobConditionBuilder;
import org.junit.jupiter.api.Test;

/**
 * What the launcher reads off a pod and a Job. Whether provisionerd has exited decides whether an
 * attempt that never acquired is lost (and its build requeued): a pod whose phase is still Running
 * but whose containers have all terminated has exited; one with a container still running has not.
 */
class JobStatusTest {
  private static ContainerStatus running(String name) {
    return new ContainerStatusBuilder()
        .withName(name)
        .withNewState()
        .withNewRunning()
        .endRunning()
        .endState()
        .build();
  }

  private static ContainerStatus terminated(String name, int code, String reason) {
    return new ContainerStatusBuilder()
        .withName(name)
        .withNewState()
        .withNewTerminated()
        .withExitCode(code)
        .withReason(reason)
        .endTerminated()
        .endState()
        .build();
  }

  private static Pod pod(String phase, ContainerStatus... statuses) {
    return new PodBuilder()
        .withNewMetadata()
        .withName("oneshot-7-1-abcde")
        .endMetadata()
        .withNewStatus()
        .withPhase(phase)
        .withContainerStatuses(statuses)
        .endStatus()
        .build();
  }

  @Test
  void aPodHasExitedWhenItEndedOrEveryContainerTerminated() {
    assertThat(JobStatus.exited(new PodBuilder().build())).as("no status yet").isFalse();
    assertThat(JobStatus.exited(pod("Failed"))).isTrue();
    assertThat(JobStatus.exited(pod("Succeeded"))).isTrue();
    assertThat(JobStatus.exited(pod("Pending"))).as("no container status yet").isFalse();
    assertThat(JobStatus.exited(pod("Running", terminated("provisionerd", 1, "Error")))).isTrue();
    assertThat(
            JobStatus.exited(
                pod("Running", terminated("provisionerd", 0, "Completed"), running("sidecar"))))
        .as("a sidecar still runs")
        .isFalse();
    assertThat(JobStatus.exited(pod("Running", running("provisionerd")))).isFalse();
    assertThat(
            JobStatus.exited(
                pod("Running", new ContainerStatusBuilder().withName("provisionerd").build())))
        .as("a container without a state")
        .isFalse();
  }

  @Test
  void aPendingPodSaysWhatItWaitsOn() {
    assertThat(JobStatus.phase(new PodBuilder().build())).isEqualTo("(no status yet)");
    assertThat(JobStatus.phase(pod("Running", running("provisionerd")))).isEqualTo("Running");
    Pod pulling =
        pod(
            "Pending",
            new ContainerStatusBuilder()
                .withName("provisionerd")
                .withNewState()
                .withNewWaiting()
                .withReason("ImagePullBackOff")
                .withMessage("Back-off pulling image \"nope\"")
                .endWaiting()
                .endState()
                .build());
    assertThat(JobStatus.phase(pulling))
        .isEqualTo("Pending: ImagePullBackOff: Back-off pulling image \"nope\"");
    Pod unscheduled =
        new PodBuilder()
            .withNewStatus()
            .withPhase("Pending")
            .addNewCondition()
            .withType("PodScheduled")
            .withStatus("False")
            .withReason("Unschedulable")
            .withMessage("0/3 nodes are available")
            .endCondition()
            .endStatus()
            .build();
    assertThat(JobStatus.phase(unscheduled))
        .isEqualTo("Pending: Unschedulable: 0/3 nodes are available");
    assertThat(JobStatus.phase(pod("Pending"))).isEqualTo("Pending");
  }

  @Test
  void theExitCodeIsProvisionerdsOnceItTerminated() {
    assertThat(JobStatus.exitCode(pod("Running", running("provisionerd")))).isNull();
    assertThat(JobStatus.exitCode(pod("Failed", terminated("provisionerd", 3, "Error"))))
        .isEqualTo(3);
    assertThat(JobStatus.exitCode(pod("Failed", terminated("sidecar", 9, "Error")))).isNull();
  }

  @Test
  void aFailedJobSaysWhyWithItsPodsReason() {
    Job job =
        new JobBuilder()
            .withNewMetadata()
            .withName("oneshot-7-1")
            .withNamespace("team-a")
            .endMetadata()
            .build();
    JobCondition deadline =
        new JobConditionBuilder()
            .withType("Failed")
            .withStatus("True")
            .withReason("DeadlineExceeded")
            .withMessage("Job was active longer than specified deadline")
            .build();
    assertThat(JobStatus.failure(job, deadline, null))
        .isEqualTo(
            "Job team-a/oneshot-7-1 failed: DeadlineExceeded: Job was active longer than"
                + " specified deadline");
    JobCondition bare = new JobConditionBuilder().withType("Failed").withStatus("True").build();
    assertThat(JobStatus.failure(job, bare, pod("Failed", terminated("provisionerd", 137, null))))
        .startsWith("Job team-a/oneshot-7-1 failed: Failed; pod oneshot-7-1-abcde: container")
        .contains("exit code 137");
  }

  /**
   * The kubelet's word that nothing of an attempt runs: every pod it holds has exited. A pod still
   * terminating (a drain under way) is no proof, and neither is knowing of no pod at all.
   */
  @Test
  void nothingRunsOnlyWhenEveryPodExited() {
    Pod ended = pod("Failed", terminated("provisionerd", 137, "OOMKilled"));
    Pod draining = pod("Running", running("provisionerd"));
    assertThat(JobStatus.allExited(java.util.List.of(ended))).isTrue();
    assertThat(JobStatus.allExited(java.util.List.of(ended, draining))).isFalse();
    assertThat(JobStatus.allExited(java.util.List.of())).isFalse();
  }
}
