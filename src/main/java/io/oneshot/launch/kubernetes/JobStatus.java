package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.ContainerStatus;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobCondition;
import java.util.List;

/**
 * Reading Jobs and Pods as the controllers wrote them: a Job's conditions, a pod's phase and what a
 * pending pod waits on, its exit code, and why a Job failed, in a sentence.
 */
final class JobStatus {
  private JobStatus() {}

  /** Whether the pod's provisionerd container has stopped (or the pod has ended). */
  static boolean exited(Pod p) {
    if (p.getStatus() == null) {
      return false;
    }
    if ("Failed".equals(p.getStatus().getPhase()) || "Succeeded".equals(p.getStatus().getPhase())) {
      return true;
    }
    List<ContainerStatus> cs = p.getStatus().getContainerStatuses();
    return cs != null
        && !cs.isEmpty()
        && cs.stream().allMatch(c -> c.getState() != null && c.getState().getTerminated() != null);
  }

  /**
   * Whether the kubelet reported every one of these pods ended (none may still run a process): the
   * word of the node, which a Job's conditions are not (a Job past its deadline is Failed while its
   * pod still terminates). None known is no proof.
   */
  static boolean allExited(List<Pod> pods) {
    return !pods.isEmpty() && pods.stream().allMatch(JobStatus::exited);
  }

  /** Waiting reasons of the provisionerd container that another pod would meet as well. */
  private static final java.util.Set<String> STUCK_WAITING =
      java.util.Set.of(
          "ErrImagePull",
          "ImagePullBackOff",
          "ErrImageNeverPull",
          "InvalidImageName",
          "CreateContainerConfigError");

  /**
   * Why a pending pod cannot start in a way a new pod of the same template would not change: no
   * node can take it (the scheduler's message), or its image or configuration cannot be had (the
   * kubelet's). Null when it is not stuck, or not pending.
   */
  static String stuck(Pod pod) {
    if (pod == null
        || pod.getStatus() == null
        || !"Pending".equals(pod.getStatus().getPhase())
        || pod.getMetadata().getDeletionTimestamp() != null) {
      return null;
    }
    ContainerStatus cs = PodNotes.provisionerd(pod);
    if (cs != null && cs.getState() != null && cs.getState().getWaiting() != null) {
      var w = cs.getState().getWaiting();
      if (STUCK_WAITING.contains(w.getReason())) {
        return "container provisionerd of pod "
            + pod.getMetadata().getName()
            + " cannot start: "
            + w.getReason()
            + (w.getMessage() == null ? "" : ": " + w.getMessage());
      }
    }
    if (pod.getStatus().getConditions() != null) {
      for (PodCondition c : pod.getStatus().getConditions()) {
        if ("PodScheduled".equals(c.getType())
            && "False".equals(c.getStatus())
            && "Unschedulable".equals(c.getReason())) {
          return "pod "
              + pod.getMetadata().getName()
              + " cannot be scheduled: "
              + (c.getMessage() == null ? "Unschedulable" : c.getMessage());
        }
      }
    }
    return null;
  }

  /** Whether the Job has ended: it has a Complete or a Failed condition. */
  static boolean finished(Job job) {
    return condition(job, "Complete") != null || condition(job, "Failed") != null;
  }

  static JobCondition condition(Job job, String type) {
    if (job.getStatus() == null || job.getStatus().getConditions() == null) {
      return null;
    }
    for (JobCondition c : job.getStatus().getConditions()) {
      if (type.equals(c.getType()) && "True".equals(c.getStatus())) {
        return c;
      }
    }
    return null;
  }

  /**
   * The pod's phase, and for a pending pod what it waits on: "Pending: ImagePullBackOff: Back-off
   * pulling image …", "Pending: Unschedulable: 0/3 nodes are available: …".
   */
  static String phase(Pod pod) {
    if (pod.getStatus() == null || pod.getStatus().getPhase() == null) {
      return "(no status yet)";
    }
    String phase = pod.getStatus().getPhase();
    if (!"Pending".equals(phase)) {
      return phase;
    }
    ContainerStatus cs = PodNotes.provisionerd(pod);
    if (cs != null && cs.getState() != null && cs.getState().getWaiting() != null) {
      var w = cs.getState().getWaiting();
      return phase + ": " + w.getReason() + (w.getMessage() == null ? "" : ": " + w.getMessage());
    }
    for (var c :
        pod.getStatus().getConditions() == null
            ? List.<PodCondition>of()
            : pod.getStatus().getConditions()) {
      if ("PodScheduled".equals(c.getType()) && "False".equals(c.getStatus())) {
        return phase + ": " + c.getReason() + (c.getMessage() == null ? "" : ": " + c.getMessage());
      }
    }
    return phase;
  }

  static Integer exitCode(Pod pod) {
    ContainerStatus cs = PodNotes.provisionerd(pod);
    if (cs != null && cs.getState() != null && cs.getState().getTerminated() != null) {
      return cs.getState().getTerminated().getExitCode();
    }
    return null;
  }

  /** Why a Job failed, in a sentence: the Job's reason, and the pod's when there is one. */
  static String failure(Job job, JobCondition failed, Pod pod) {
    StringBuilder b =
        new StringBuilder("Job ")
            .append(job.getMetadata().getNamespace())
            .append('/')
            .append(job.getMetadata().getName())
            .append(" failed: ")
            .append(failed.getReason() == null ? "Failed" : failed.getReason());
    if (failed.getMessage() != null && !failed.getMessage().isBlank()) {
      b.append(": ").append(failed.getMessage());
    }
    String podWhy = PodNotes.whyEnded(pod);
    if (podWhy != null) {
      b.append("; ").append(podWhy);
    }
    return b.toString();
  }
}
