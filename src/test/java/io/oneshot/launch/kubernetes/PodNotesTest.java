package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Event;
import io.fabric8.kubernetes.api.model.EventBuilder;
import io.oneshot.launch.AttemptEvents.Note;
import java.util.List;
import org.junit.jupiter.api.Test;

class PodNotesTest {
  /**
   * The Job controller's FailedCreate Event, as kube-controller-manager v1.20.2 records it on the
   * real node: "Error creating: " and the API server's refusal, which names the pod it generated.
   */
  private static Event failedCreate(String message) {
    return new EventBuilder()
        .withReason("FailedCreate")
        .withType("Warning")
        .withMessage("Error creating: " + message)
        .withNewInvolvedObject()
        .withKind("Job")
        .withName("oneshot-7-1")
        .endInvolvedObject()
        .build();
  }

  @Test
  void aPodTheJobControllerCannotCreateIsTheWaitReasonSaidOncePerRefusal() {
    PodNotes notes = new PodNotes();
    List<Note> first =
        notes.jobEvent(
            "oneshot-7-1",
            failedCreate(
                "pods \"oneshot-7-1-9prqp\" is forbidden: exceeded quota: q, requested: pods=1,"
                    + " used: pods=0, limited: pods=0"));
    assertThat(first)
        .singleElement()
        .satisfies(
            n -> {
              assertThat(n.waitReason()).isTrue();
              assertThat(n.trouble()).isEqualTo("quota");
              assertThat(n.level()).isEqualTo("warn");
              assertThat(n.text())
                  .startsWith(
                      "the Job controller cannot create the pod (a ResourceQuota of the"
                          + " namespace): Error creating: pods \"oneshot-7-1-9prqp\"");
            });
    // The Job controller's next try generates another pod name: the same refusal, not said again.
    assertThat(
            notes.jobEvent(
                "oneshot-7-1",
                failedCreate(
                    "pods \"oneshot-7-1-x2k8d\" is forbidden: exceeded quota: q, requested:"
                        + " pods=1, used: pods=0, limited: pods=0")))
        .isEmpty();
    // Another refusal is the new reason, and trouble of its own kind, once.
    List<Note> limit =
        notes.jobEvent(
            "oneshot-7-1",
            failedCreate(
                "pods \"oneshot-7-1-abcde\" is forbidden: maximum memory usage per Container is"
                    + " 1Gi, but limit is 2Gi"));
    assertThat(limit)
        .singleElement()
        .satisfies(
            n -> {
              assertThat(n.trouble()).isEqualTo("pod_refused");
              assertThat(n.waitReason()).isTrue();
              assertThat(n.text()).contains("maximum memory usage per Container is 1Gi");
            });
  }

  private static io.fabric8.kubernetes.api.model.Pod pod(
      io.fabric8.kubernetes.api.model.ContainerState state) {
    return new io.fabric8.kubernetes.api.model.PodBuilder()
        .withNewMetadata()
        .withName("oneshot-7-1-abcde")
        .addToLabels("job-name", "oneshot-7-1")
        .endMetadata()
        .withNewStatus()
        .withPhase("Succeeded")
        .addNewContainerStatus()
        .withName("provisionerd")
        .withState(state)
        .endContainerStatus()
        .endStatus()
        .build();
  }

  /**
   * A container that started and ended between two of the kubelet's relists is first heard of
   * terminated: its start is still in the timeline, once.
   */
  @Test
  void aContainerFirstHeardOfTerminatedStillHasItsStartSaidOnce() {
    PodNotes notes = new PodNotes();
    io.fabric8.kubernetes.api.model.ContainerState ended =
        new io.fabric8.kubernetes.api.model.ContainerStateBuilder()
            .withNewTerminated()
            .withExitCode(0)
            .withReason("Completed")
            .withStartedAt("2026-12-02T17:10:54Z")
            .withFinishedAt("2026-12-02T17:10:56Z")
            .endTerminated()
            .build();
    List<Note> first = notes.pod("oneshot-7-1", pod(ended));
    assertThat(first)
        .filteredOn(Note::milestone)
        .extracting(Note::text)
        .containsExactly("container provisionerd started in pod oneshot-7-1-abcde");
    assertThat(notes.pod("oneshot-7-1", pod(ended))).isEmpty();
    // Heard running first: the start is said then, and not again at its end.
    PodNotes other = new PodNotes();
    io.fabric8.kubernetes.api.model.ContainerState running =
        new io.fabric8.kubernetes.api.model.ContainerStateBuilder()
            .withNewRunning()
            .withStartedAt("2026-12-02T17:10:54Z")
            .endRunning()
            .build();
    assertThat(other.pod("oneshot-7-1", pod(running))).filteredOn(Note::milestone).hasSize(1);
    assertThat(other.pod("oneshot-7-1", pod(ended))).filteredOn(Note::milestone).isEmpty();
  }
}
