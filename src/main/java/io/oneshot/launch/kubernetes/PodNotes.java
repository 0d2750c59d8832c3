package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.ContainerStateTerminated;
import io.fabric8.kubernetes.api.model.ContainerStateWaiting;
import io.fabric8.kubernetes.api.model.ContainerStatus;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobCondition;
import io.oneshot.launch.AttemptEvents.Note;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Turns what Kubernetes reports about an attempt's pod and Job into lines for the build's log and
 * steps in its timeline, each once: "why is it still pending" (cannot be scheduled, image cannot be
 * pulled) and "why did it end" (OOMKilled, evicted, past its deadline) must be answerable from
 * {@code oneshot builds show}.
 */
final class PodNotes {
  private static final Set<String> WAITING_TROUBLE =
      Set.of(
          "ImagePullBackOff",
          "ErrImagePull",
          "ErrImageNeverPull",
          "InvalidImageName",
          "CreateContainerConfigError",
          "CreateContainerError",
          "CrashLoopBackOff",
          "RunContainerError");

  /** What was already said, per attempt (Job name). */
  private final Map<String, Set<String>> said = new ConcurrentHashMap<>();

  private boolean once(String attempt, String key) {
    return said.computeIfAbsent(attempt, k -> ConcurrentHashMap.newKeySet()).add(key);
  }

  /** The note, marked as trouble of {@code kind} the first time this attempt has it. */
  private Note trouble(String attempt, String kind, Note note) {
    return once(attempt, "trouble " + kind) ? note.trouble(kind) : note;
  }

  /** The kind of trouble a waiting container reason is. */
  private static String waitingKind(String reason) {
    return switch (reason) {
      case "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName" ->
          "image_pull";
      default -> "cannot_start";
    };
  }

  /** Whether this pod is new to us (its name is then recorded as where the attempt runs). */
  boolean firstSeen(Pod pod) {
    String job = jobName(pod);
    return job != null && once(job, "pod " + pod.getMetadata().getName());
  }

  void forget(String jobName) {
    said.remove(jobName);
  }

  /**
   * A running pod of the attempt is being deleted (a drain, an eviction, by hand) while its Job
   * stays: its provisionerd gets SIGTERM, finishes the build and takes no other; the kubelet kills
   * it only at the end of the pod's termination grace. Said once, in the log and the timeline. A
   * pod that never ran (still pending) is not said to be.
   */
  java.util.Optional<Note> deleting(String attempt, Pod pod) {
    // A Job already forgotten (deleted: a cancel, a cleanup) is not brought back.
    Set<String> known = said.get(attempt);
    if (!running(pod) || known == null || !known.add("deleting " + pod.getMetadata().getName())) {
      return java.util.Optional.empty();
    }
    Long grace = pod.getMetadata().getDeletionGracePeriodSeconds();
    return java.util.Optional.of(
        new Note(
            "warn",
            "pod "
                + pod.getMetadata().getName()
                + " is being deleted while it runs the build; provisionerd gets SIGTERM and"
                + " finishes the build"
                + (grace == null ? "" : " within the pod's termination grace of " + grace + " s"),
            true));
  }

  private static boolean running(Pod pod) {
    return pod.getStatus() != null && "Running".equals(pod.getStatus().getPhase());
  }

  /** The build of an attempt's name ({@code oneshot-BUILD-ATTEMPT}). */
  private static String buildOf(String attempt) {
    String[] parts = attempt.split("-");
    return parts.length == 3 ? parts[1] : "ID";
  }

  List<Note> pod(String attempt, Pod pod) {
    List<Note> out = new ArrayList<>();
    String name = pod.getMetadata().getName();
    if (pod.getStatus() == null) {
      return out;
    }
    // The last words of a pod whose Job is already deleted and forgotten (a cancel, a build failed
    // at its launch timeout) are not said again, nor counted twice.
    if (pod.getMetadata().getDeletionTimestamp() != null && !said.containsKey(attempt)) {
      return out;
    }
    if (pod.getMetadata().getDeletionTimestamp() != null && running(pod)) {
      deleting(attempt, pod).ifPresent(out::add);
    }
    for (PodCondition c : list(pod.getStatus().getConditions())) {
      if ("PodScheduled".equals(c.getType()) && "True".equals(c.getStatus())) {
        String node = pod.getSpec() == null ? null : pod.getSpec().getNodeName();
        if (once(attempt, "scheduled")) {
          out.add(
              Note.milestone(
                      "pod " + name + " scheduled" + (node == null ? "" : " on node " + node))
                  .asWaitReason());
        }
      } else if ("PodScheduled".equals(c.getType()) && "False".equals(c.getStatus())) {
        String why =
            (c.getReason() == null ? "Unschedulable" : c.getReason()) + ": " + c.getMessage();
        if (once(attempt, "unschedulable " + why)) {
          out.add(
              trouble(
                  attempt,
                  "unschedulable",
                  Note.warn("pod " + name + " cannot be scheduled yet: " + why).asWaitReason()));
        }
      } else if ("DisruptionTarget".equals(c.getType()) && "True".equals(c.getStatus())) {
        if (once(attempt, "disrupted")) {
          out.add(
              trouble(
                  attempt,
                  "disrupted",
                  Note.warn(
                      "pod "
                          + name
                          + " is being disrupted: "
                          + c.getReason()
                          + ": "
                          + c.getMessage())));
        }
      }
    }
    if ("Evicted".equals(pod.getStatus().getReason()) && once(attempt, "evicted")) {
      out.add(
          trouble(
              attempt,
              "evicted",
              Note.warn("pod " + name + " was evicted: " + pod.getStatus().getMessage())));
    }
    ContainerStatus cs = provisionerd(pod);
    if (cs != null && cs.getState() != null) {
      ContainerStateWaiting w = cs.getState().getWaiting();
      if (w != null
          && WAITING_TROUBLE.contains(w.getReason())
          && once(attempt, "waiting " + w.getReason())) {
        out.add(
            trouble(
                attempt,
                waitingKind(w.getReason()),
                Note.warn(
                        "container provisionerd cannot start: "
                            + w.getReason()
                            + (w.getMessage() == null ? "" : ": " + w.getMessage()))
                    .asWaitReason()));
      }
      if (cs.getState().getRunning() != null && once(attempt, "started")) {
        out.add(Note.milestone("container provisionerd started in pod " + name).asWaitReason());
      }
      ContainerStateTerminated t = cs.getState().getTerminated();
      // A container that started and ended between two of the kubelet's relists (once a second in
      // 1.20: its PLEG) is reported terminated with no running state ever seen: its start is
      // said as it is heard, so that the timeline still has it.
      if (t != null && t.getStartedAt() != null && once(attempt, "started")) {
        out.add(Note.milestone("container provisionerd started in pod " + name).asWaitReason());
      }
      if (t != null && once(attempt, "terminated")) {
        if ("OOMKilled".equals(t.getReason())) {
          out.add(
              trouble(
                  attempt,
                  "oom_killed",
                  Note.error(
                      Integer.valueOf(137).equals(t.getExitCode())
                          ? "container provisionerd was OOMKilled (exit code 137): the pod hit its"
                              + " memory limit (what the build asked for, or its route's"
                              + " template's); rerun it with more: oneshot builds rerun "
                              + buildOf(attempt)
                              + " --memory <more>"
                          // containerd says OOMKilled of a container in whose cgroup any process
                          // was killed for memory; provisionerd, not killed, said which and why.
                          : "a process in container provisionerd was killed for memory (the"
                              + " kubelet says OOMKilled; provisionerd exited with code "
                              + t.getExitCode()
                              + " and reported the build)")));
        } else if (t.getExitCode() != null && t.getExitCode() != 0) {
          out.add(
              Note.warn(
                  "container provisionerd exited with code "
                      + t.getExitCode()
                      + (t.getReason() == null ? "" : " (" + t.getReason() + ")")));
        }
      }
    }
    return out;
  }

  List<Note> job(Job job) {
    List<Note> out = new ArrayList<>();
    if (job.getStatus() == null) {
      return out;
    }
    String name = job.getMetadata().getName();
    for (JobCondition c : list(job.getStatus().getConditions())) {
      if ("Failed".equals(c.getType())
          && "True".equals(c.getStatus())
          && once(name, "job failed")) {
        String why = c.getReason() == null ? "Failed" : c.getReason();
        if ("DeadlineExceeded".equals(why)) {
          out.add(
              trouble(
                  name,
                  "deadline_exceeded",
                  Note.error(
                      "Job "
                          + name
                          + " passed its activeDeadlineSeconds and Kubernetes stopped it ("
                          + c.getMessage()
                          + ")")));
        } else {
          out.add(
              Note.error(
                  "Job "
                      + name
                      + " failed: "
                      + why
                      + (c.getMessage() == null ? "" : ": " + c.getMessage())));
        }
      }
    }
    return out;
  }

  /**
   * The Job controller could not create the attempt's pod (an Event with reason {@code
   * FailedCreate} on the Job): most often a ResourceQuota of the namespace ("exceeded quota: …"),
   * or a LimitRange or an admission webhook. Nothing of it is in the Job's status in 1.20 (the Job
   * controller only records the Event and tries again with its backoff:
   * pkg/controller/job/job_controller.go, manageJob), so without it the build waits as "launched"
   * with no pod and no word why. The wait reason is said again only when the refusal changes (the
   * generated pod names in its message aside).
   */
  List<Note> jobEvent(String attempt, io.fabric8.kubernetes.api.model.Event event) {
    String message = event.getMessage() == null ? "" : event.getMessage();
    String key = message.replaceAll("pods \"[^\"]*\"", "pods");
    if (!once(attempt, "failed create " + key)) {
      return List.of();
    }
    boolean quota = ApiErrors.quota(message);
    return List.of(
        trouble(
            attempt,
            quota ? "quota" : "pod_refused",
            Note.warn(
                    "the Job controller cannot create the pod"
                        + (quota ? " (a ResourceQuota of the namespace)" : "")
                        + ": "
                        + message)
                .asWaitReason()));
  }

  /** A pod's provisionerd container status, or null. */
  static ContainerStatus provisionerd(Pod pod) {
    if (pod == null || pod.getStatus() == null) {
      return null;
    }
    for (ContainerStatus cs : list(pod.getStatus().getContainerStatuses())) {
      if (JobTemplates.CONTAINER.equals(cs.getName())) {
        return cs;
      }
    }
    return null;
  }

  /** Why a pod ended, in a few words, or null when it has not. */
  static String whyEnded(Pod pod) {
    if (pod == null || pod.getStatus() == null) {
      return null;
    }
    if ("Evicted".equals(pod.getStatus().getReason())) {
      return "pod " + pod.getMetadata().getName() + " evicted: " + pod.getStatus().getMessage();
    }
    for (PodCondition c : list(pod.getStatus().getConditions())) {
      if ("DisruptionTarget".equals(c.getType()) && "True".equals(c.getStatus())) {
        return "pod "
            + pod.getMetadata().getName()
            + " disrupted: "
            + c.getReason()
            + ": "
            + c.getMessage();
      }
    }
    ContainerStatus cs = provisionerd(pod);
    if (cs != null && cs.getState() != null && cs.getState().getTerminated() != null) {
      ContainerStateTerminated t = cs.getState().getTerminated();
      return "pod "
          + pod.getMetadata().getName()
          + ": container provisionerd "
          + (t.getReason() == null ? "ended" : t.getReason())
          + " (exit code "
          + t.getExitCode()
          + ")";
    }
    return null;
  }

  private static String jobName(Pod pod) {
    Map<String, String> l = pod.getMetadata().getLabels();
    if (l == null) {
      return null;
    }
    String n = l.get("batch.kubernetes.io/job-name");
    return n != null ? n : l.get("job-name");
  }

  private static <T> List<T> list(List<T> l) {
    return l == null ? List.of() : l;
  }
}
