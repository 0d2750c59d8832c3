package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.Event;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.ObjectReference;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * oneshot's Jobs and Pods, watched with informers (filtered by the {@code oneshot.io/build} label)
 * in every namespace the routes use: the launcher reads its caches instead of calling the API
 * server, and each change is told to the dispatcher ({@link AttemptEvents}) with what explains a
 * wait or a failure ({@link PodNotes}).
 */
final class ClusterWatch {
  private static final Logger log = LoggerFactory.getLogger(ClusterWatch.class);
  private static final long RESYNC_MS = 10 * 60 * 1000;
  private static final Duration SYNC_TIMEOUT = Duration.ofMinutes(2);

  private final KubernetesClient client;
  private final Set<String> namespaces;
  private final Map<String, SharedIndexInformer<Job>> jobs = new LinkedHashMap<>();
  private final Map<String, SharedIndexInformer<Pod>> pods = new LinkedHashMap<>();
  private final Map<String, SharedIndexInformer<Event>> jobEvents = new LinkedHashMap<>();
  private final PodNotes notes = new PodNotes();
  private final ReentrantLock podEvents = new ReentrantLock();
  private final Condition podChanged = podEvents.newCondition();
  private volatile AttemptEvents events = AttemptEvents.NONE;

  private final ApiReachability api;

  ClusterWatch(KubernetesClient client, Set<String> namespaces, ApiReachability api) {
    this.client = client;
    this.namespaces = namespaces;
    this.api = api;
    WatchedKinds.register(client.getKubernetesSerialization());
  }

  void events(AttemptEvents events) {
    this.events = events;
  }

  /** The namespace of attempts recorded without one (before namespaces were recorded). */
  String firstNamespace() {
    return namespaces.iterator().next();
  }

  /**
   * Starts the informers of every namespace and waits until each has listed what is there; fails
   * saying which could not be watched.
   */
  void start() {
    for (String ns : namespaces) {
      jobs.put(
          ns,
          watch(
              client
                  .batch()
                  .v1()
                  .jobs()
                  .inNamespace(ns)
                  .withLabel(JobFactory.BUILD)
                  .runnableInformer(RESYNC_MS),
              this::onJob));
      pods.put(
          ns,
          watch(
              client.pods().inNamespace(ns).withLabel(JobFactory.BUILD).runnableInformer(RESYNC_MS),
              this::onPod));
    }
    List<SharedIndexInformer<?>> all = new ArrayList<>();
    all.addAll(jobs.values());
    all.addAll(pods.values());
    // The Job controller's refusals to create a pod (a quota, a LimitRange, a webhook) are Events
    // on the Job, not in its status. They explain a wait and nothing depends on them: the start
    // does not wait for them, and a Role without events list/watch (a chart older than this) costs
    // only the explanation, said once.
    for (String ns : namespaces) {
      SharedIndexInformer<Event> inf =
          client
              .v1()
              .events()
              .inNamespace(ns)
              .withField("involvedObject.kind", "Job")
              .withField("reason", "FailedCreate")
              .runnableInformer(RESYNC_MS);
      inf.addEventHandler(
          new ResourceEventHandler<Event>() {
            @Override
            public void onAdd(Event e) {
              safely(() -> onJobEvent(e));
            }

            @Override
            public void onUpdate(Event before, Event e) {
              safely(() -> onJobEvent(e));
            }

            @Override
            public void onDelete(Event e, boolean unknown) {}
          });
      inf.exceptionHandler(
          (started, e) -> {
            if (e instanceof KubernetesClientException k && k.getCode() == 403) {
              log.warn(
                  "Cannot watch Events in namespace {} ({}): a pod the Job controller cannot"
                      + " create (a quota, a LimitRange) will not be a build's wait reason. The"
                      + " chart's Role grants list and watch on events.",
                  ns,
                  ApiErrors.rootMessage(e));
              return false;
            }
            log.warn("Watching Events failed: {}. Will try again.", ApiErrors.rootMessage(e));
            return true;
          });
      jobEvents.put(ns, inf);
      inf.start();
    }
    for (SharedIndexInformer<?> inf : all) {
      try {
        inf.start().toCompletableFuture().get(SYNC_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      } catch (Exception e) {
        throw new IllegalStateException(
            "cannot watch "
                + inf.getApiTypeClass().getSimpleName()
                + "s in namespaces "
                + namespaces
                + " on the Kubernetes API server "
                + client.getMasterUrl()
                + ": "
                + ApiErrors.rootMessage(e),
            e);
      }
    }
    log.info(
        "Watching oneshot's Jobs and Pods in namespaces {} on {}: {} Jobs found.",
        namespaces,
        client.getMasterUrl(),
        jobs.values().stream().mapToInt(i -> i.getStore().list().size()).sum());
  }

  /** Every Job seen, in every namespace. */
  List<Job> jobs() {
    List<Job> out = new ArrayList<>();
    jobs.values().forEach(inf -> out.addAll(inf.getStore().list()));
    return out;
  }

  /** The namespaces watched: every one the routes use. */
  Set<String> namespaces() {
    return namespaces;
  }

  /**
   * The pod of that name as the informers last saw it, once it passes the test or the wait is over
   * (then as it is); null if it was never seen or is gone. Woken by every pod event.
   */
  Pod awaitPod(String name, Predicate<Pod> until, Duration wait) throws InterruptedException {
    long deadline = System.nanoTime() + wait.toNanos();
    boolean seen = false;
    podEvents.lock();
    try {
      while (true) {
        Pod found = null;
        for (SharedIndexInformer<Pod> inf : pods.values()) {
          for (Pod p : inf.getStore().list()) {
            if (p.getMetadata().getName().equals(name)) {
              found = p;
            }
          }
        }
        if (found == null && seen) {
          return null;
        }
        seen |= found != null;
        long left = deadline - System.nanoTime();
        if ((found != null && until.test(found)) || left <= 0) {
          return found;
        }
        podChanged.awaitNanos(left);
      }
    } finally {
      podEvents.unlock();
    }
  }

  private <T extends HasMetadata> SharedIndexInformer<T> watch(
      SharedIndexInformer<T> informer, Consumer<T> onChange) {
    informer.addEventHandler(
        new ResourceEventHandler<T>() {
          @Override
          public void onAdd(T obj) {
            api.answered();
            safely(() -> onChange.accept(obj));
          }

          @Override
          public void onUpdate(T oldObj, T newObj) {
            api.answered();
            safely(() -> onChange.accept(newObj));
          }

          @Override
          public void onDelete(T obj, boolean deletedFinalStateUnknown) {
            api.answered();
            safely(
                () -> {
                  refOf(obj).ifPresent(events::changed);
                  if (obj instanceof Pod pod) {
                    podsChanged();
                    if (!deletedFinalStateUnknown) {
                      refOf(pod)
                          .ifPresent(
                              ref ->
                                  notes
                                      .deleting(ref.name(), pod)
                                      .ifPresent(n -> events.note(ref, n)));
                    }
                  }
                  if (obj instanceof Job) {
                    notes.forget(obj.getMetadata().getName());
                  }
                });
          }
        });
    // An API server that fails a list or a watch (at start too: a 500, a dropped connection) is
    // tried again with fabric8's backoff, rather than leaving the informer, or the dispatcher,
    // dead.
    informer.exceptionHandler(
        (started, e) -> {
          log.warn(
              "Watching {}s failed{}: {}. Will try again.",
              informer.getApiTypeClass().getSimpleName(),
              started ? "" : " before the first list",
              ApiErrors.rootMessage(e));
          if (!(e instanceof KubernetesClientException k) || k.getCode() <= 0) {
            api.unanswered(ApiErrors.rootMessage(e));
          }
          return true;
        });
    return informer;
  }

  private static void safely(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      log.warn("Handling a Kubernetes event failed: {}. Will keep watching.", e.toString());
    }
  }

  private void onJob(Job job) {
    Optional<AttemptRef> ref = refOf(job);
    if (ref.isEmpty()) {
      return;
    }
    // The two informers are two watches: a pod can be heard of before its Job (the scheduler's
    // "cannot be scheduled" comes a few milliseconds after the pod is made, and on a busy node the
    // Jobs' watch lags). What its pods said then was kept back; it is said now (each note once).
    for (Pod pod : podsOf(job.getMetadata().getNamespace(), job.getMetadata().getName())) {
      if (ref.equals(refOf(pod))) {
        podNotes(ref.get(), pod);
      }
    }
    notes.job(job).forEach(n -> events.note(ref.get(), n));
    if (JobStatus.finished(job)) {
      events.changed(ref.get());
    }
  }

  private void onJobEvent(Event e) {
    ObjectReference o = e.getInvolvedObject();
    // The API server filters by kind and reason; a server that ignores the selector (the mock)
    // sends everything.
    if (o == null || !"Job".equals(o.getKind()) || !"FailedCreate".equals(e.getReason())) {
      return;
    }
    Job job = cachedJob(o.getNamespace(), o.getName());
    if (job == null || o.getUid() == null || !o.getUid().equals(job.getMetadata().getUid())) {
      return; // not one of oneshot's Jobs, or an earlier Job of the same name
    }
    Optional<AttemptRef> ref = refOf(job);
    // A pod created since (the quota freed) makes an old refusal, listed again after a restart or
    // a resync, no longer the reason.
    if (ref.isEmpty() || !podsOf(o.getNamespace(), o.getName()).isEmpty()) {
      return;
    }
    notes.jobEvent(o.getName(), e).forEach(n -> events.note(ref.get(), n));
  }

  private void podsChanged() {
    podEvents.lock();
    try {
      podChanged.signalAll();
    } finally {
      podEvents.unlock();
    }
  }

  private void onPod(Pod pod) {
    podsChanged();
    Optional<AttemptRef> ref = refOf(pod);
    if (ref.isEmpty()) {
      return;
    }
    // A pod whose Job is gone (deleted: a cancel, a build failed at its launch timeout) says
    // nothing more of the attempt: its last status updates would be said, and counted, twice.
    // A pod whose Job is not in the cache yet is said when the Job is (onJob).
    if (cachedJob(pod.getMetadata().getNamespace(), ref.get().name()) != null) {
      podNotes(ref.get(), pod);
    }
    if (JobStatus.exited(pod) || pod.getMetadata().getDeletionTimestamp() != null) {
      events.changed(ref.get());
    }
  }

  /**
   * What a pod of a known Job says of its attempt: where it runs, why it waits or ended. One at a
   * time: the pods' informer and the Jobs' (which says what a pod heard of first said) must not
   * give one build's notes out of order.
   */
  private synchronized void podNotes(AttemptRef ref, Pod pod) {
    if (notes.firstSeen(pod)) {
      events.runsIn(ref, pod.getMetadata().getName());
    }
    notes.pod(ref.name(), pod).forEach(n -> events.note(ref, n));
  }

  /** The attempt an object belongs to, from its labels. */
  static Optional<AttemptRef> refOf(HasMetadata obj) {
    Map<String, String> l = obj.getMetadata().getLabels();
    if (l == null || !l.containsKey(JobFactory.BUILD) || !l.containsKey(JobFactory.ATTEMPT)) {
      return Optional.empty();
    }
    try {
      long build = Long.parseLong(l.get(JobFactory.BUILD));
      int attempt = Integer.parseInt(l.get(JobFactory.ATTEMPT));
      return Optional.of(
          new AttemptRef(
              build, attempt, Attempt.nameOf(build, attempt), obj.getMetadata().getNamespace()));
    } catch (NumberFormatException e) {
      return Optional.empty();
    }
  }

  /** The pod of that name in {@code ns} as the informer last saw it; null if not seen. */
  Pod cachedPod(String ns, String name) {
    SharedIndexInformer<Pod> inf = pods.get(ns);
    return inf == null ? null : inf.getStore().getByKey(ns + "/" + name);
  }

  Job cachedJob(String ns, String name) {
    SharedIndexInformer<Job> inf = jobs.get(ns);
    return inf == null ? null : inf.getStore().getByKey(ns + "/" + name);
  }

  /** Every pod of the Job the informer holds. */
  List<Pod> podsOf(String ns, String jobName) {
    SharedIndexInformer<Pod> inf = pods.get(ns);
    if (inf == null) {
      return List.of();
    }
    List<Pod> out = new ArrayList<>();
    for (Pod p : inf.getStore().list()) {
      Map<String, String> l = p.getMetadata().getLabels();
      if (l != null
          && (jobName.equals(l.get("job-name"))
              || jobName.equals(l.get("batch.kubernetes.io/job-name")))) {
        out.add(p);
      }
    }
    return out;
  }

  Pod podOf(String ns, String jobName) {
    SharedIndexInformer<Pod> inf = pods.get(ns);
    if (inf == null) {
      return null;
    }
    Pod newest = null;
    for (Pod p : inf.getStore().list()) {
      Map<String, String> l = p.getMetadata().getLabels();
      if (l != null && jobName.equals(l.get("job-name"))
          || l != null && jobName.equals(l.get("batch.kubernetes.io/job-name"))) {
        if (newest == null
            || String.valueOf(p.getMetadata().getCreationTimestamp())
                    .compareTo(String.valueOf(newest.getMetadata().getCreationTimestamp()))
                > 0) {
          newest = p;
        }
      }
    }
    return newest;
  }

  void close() {
    List<SharedIndexInformer<?>> all = new ArrayList<>();
    all.addAll(jobs.values());
    all.addAll(pods.values());
    all.addAll(jobEvents.values());
    all.forEach(SharedIndexInformer::stop);
    Informers.awaitStopped(all);
  }
}
