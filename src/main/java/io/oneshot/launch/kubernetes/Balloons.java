package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.Event;
import io.fabric8.kubernetes.api.model.ObjectReference;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.scheduling.v1.PriorityClass;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.fabric8.kubernetes.client.informers.ResourceEventHandler;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.WarmRoom;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The routes' balloons on Kubernetes: one Deployment per warm route ({@link BalloonFactory}), whose
 * replicas the leading dispatcher sets, watched with informers (the Deployments and their pods, by
 * the {@code oneshot.io/balloons} label, and the scheduler's {@code Preempted} Events) in the warm
 * routes' namespaces. The informers start with the first balloon held, so an install without warm
 * routes watches nothing more. Calls block; the leader makes them from its own thread.
 */
final class Balloons implements WarmRoom {
  private static final Logger log = LoggerFactory.getLogger(Balloons.class);
  private static final long RESYNC_MS = 10 * 60 * 1000;
  private static final Duration SYNC_TIMEOUT = Duration.ofMinutes(1);

  /** How long a PriorityClass found right is trusted before it is read again. */
  static final Duration CLASS_CHECKED_FOR = Duration.ofMinutes(5);

  /** A call to the API server: rate-limited and counted by the launcher. */
  interface Calls {
    <T> T call(String verb, Supplier<T> request) throws InterruptedException;
  }

  private final KubernetesClient client;
  private final BalloonFactory factory;
  private final Calls calls;
  private final Set<String> namespaces;
  private final List<OneshotConfig.Route> routes;
  private final ClusterWatch builds;
  private final Map<String, SharedIndexInformer<Deployment>> deployments = new LinkedHashMap<>();
  private final Map<String, SharedIndexInformer<Pod>> pods = new LinkedHashMap<>();
  private final Map<String, SharedIndexInformer<Event>> preemptions = new LinkedHashMap<>();
  private final Set<String> eventsSeen = Collections.synchronizedSet(new LinkedHashSet<>());
  private volatile Listener listener;
  private volatile Instant watchingSince;
  private volatile String trouble;
  private volatile long classCheckedAt;
  private boolean started;

  Balloons(
      KubernetesClient client,
      BalloonFactory factory,
      Calls calls,
      List<OneshotConfig.Route> routes,
      ClusterWatch builds) {
    this.client = client;
    this.factory = factory;
    this.calls = calls;
    this.routes = routes;
    this.builds = builds;
    Set<String> ns = new LinkedHashSet<>();
    for (OneshotConfig.Route r : routes) {
      if (r.warm().any()) {
        ns.add(factory.namespace(r));
      }
    }
    this.namespaces = ns;
  }

  /**
   * What kept balloons from being kept at the last look, without looking again; null if nothing.
   */
  String lastTrouble() {
    return trouble;
  }

  @Override
  public void listen(Listener listener) {
    this.listener = listener;
  }

  /**
   * Why balloons cannot be kept: their PriorityClass must exist, be below every build's (below 0,
   * the priority of a pod that names no class, and below each warm route's template's class), so
   * that a build's pod takes a balloon's place and a balloon never takes a build's. Read again
   * after {@link #CLASS_CHECKED_FOR}, and on every call while it is wrong.
   */
  @Override
  public String trouble() {
    long now = System.nanoTime();
    if (trouble == null
        && classCheckedAt != 0
        && now - classCheckedAt < CLASS_CHECKED_FOR.toNanos()) {
      return null;
    }
    String found;
    try {
      found = checkClasses();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted while reading PriorityClasses";
    } catch (KubernetesClientException e) {
      found =
          "cannot read PriorityClass "
              + factory.priorityClass()
              + " ("
              + (e.getCode() == 403
                  ? "403: the dispatcher's ClusterRole needs get on"
                      + " priorityclasses.scheduling.k8s.io, as the chart's grants"
                  : ApiErrors.message(e))
              + ")";
    }
    if (found != null && !found.equals(trouble)) {
      log.error("Balloons are not kept: {}.", found);
    } else if (found == null && trouble != null) {
      log.info("Balloons can be kept again: PriorityClass {} is right.", factory.priorityClass());
    }
    trouble = found;
    classCheckedAt = now;
    return found;
  }

  private String checkClasses() throws InterruptedException {
    String name = factory.priorityClass();
    PriorityClass balloon = priorityClass(name);
    if (balloon == null) {
      return "PriorityClass "
          + name
          + " does not exist: create it with a value below 0 and preemptionPolicy Never (the"
          + " chart does), or name another in launcher.kubernetes.balloonPriorityClass";
    }
    int value = balloon.getValue() == null ? 0 : balloon.getValue();
    if (value >= 0) {
      return "PriorityClass "
          + name
          + " has value "
          + value
          + ": balloons must be below the builds' priority (0 for a pod that names no class), or"
          + " they would keep builds out instead of making room for them";
    }
    for (OneshotConfig.Route r : routes) {
      String cls = r.warm().any() ? factory.buildPriorityClass(r) : null;
      if (cls == null) {
        continue;
      }
      PriorityClass build = priorityClass(cls);
      int bv = build == null || build.getValue() == null ? 0 : build.getValue();
      if (build != null && bv <= value) {
        return "route "
            + r.name()
            + "'s builds run at PriorityClass "
            + cls
            + " ("
            + bv
            + "), not above the balloons' "
            + name
            + " ("
            + value
            + "): a build's pod could not take a balloon's place";
      }
      if (build != null && "Never".equals(build.getPreemptionPolicy())) {
        return "route "
            + r.name()
            + "'s builds run at PriorityClass "
            + cls
            + ", whose preemptionPolicy is Never: a build's pod could not take a balloon's place";
      }
    }
    if (!"Never".equals(balloon.getPreemptionPolicy())) {
      log.warn(
          "PriorityClass {} lets balloons preempt other pods (preemptionPolicy {}); set Never.",
          name,
          balloon.getPreemptionPolicy());
    }
    return null;
  }

  private PriorityClass priorityClass(String name) throws InterruptedException {
    return calls.call("get", () -> client.scheduling().v1().priorityClasses().withName(name).get());
  }

  /** Starts the informers of the warm routes' namespaces, once. */
  private synchronized void start() {
    if (started || namespaces.isEmpty()) {
      return;
    }
    started = true;
    watchingSince = Instant.now();
    for (String ns : namespaces) {
      deployments.put(
          ns,
          client
              .apps()
              .deployments()
              .inNamespace(ns)
              .withLabel(BalloonFactory.BALLOONS)
              .runnableInformer(RESYNC_MS));
      SharedIndexInformer<Pod> p =
          client
              .pods()
              .inNamespace(ns)
              .withLabel(BalloonFactory.BALLOONS)
              .runnableInformer(RESYNC_MS);
      p.addEventHandler(changes());
      pods.put(ns, p);
      SharedIndexInformer<Event> e =
          client
              .v1()
              .events()
              .inNamespace(ns)
              .withField("involvedObject.kind", "Pod")
              .withField("reason", "Preempted")
              .runnableInformer(RESYNC_MS);
      e.addEventHandler(
          new ResourceEventHandler<>() {
            @Override
            public void onAdd(Event ev) {
              safely(() -> onEvent(ev));
            }

            @Override
            public void onUpdate(Event before, Event ev) {
              safely(() -> onEvent(ev));
            }

            @Override
            public void onDelete(Event ev, boolean unknown) {}
          });
      preemptions.put(ns, e);
    }
    List<SharedIndexInformer<?>> all = new ArrayList<>();
    all.addAll(deployments.values());
    all.addAll(pods.values());
    all.addAll(preemptions.values());
    for (SharedIndexInformer<?> inf : all) {
      inf.exceptionHandler(
          (wasStarted, e) -> {
            log.warn(
                "Watching balloon {}s failed: {}. Will try again.",
                inf.getApiTypeClass().getSimpleName(),
                ApiErrors.rootMessage(e));
            return true;
          });
    }
    for (SharedIndexInformer<?> inf : all) {
      try {
        inf.start().toCompletableFuture().get(SYNC_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      } catch (Exception e) {
        log.warn(
            "Balloon {}s in namespaces {} not listed yet: {}.",
            inf.getApiTypeClass().getSimpleName(),
            namespaces,
            ApiErrors.rootMessage(e));
      }
    }
  }

  private ResourceEventHandler<Pod> changes() {
    return new ResourceEventHandler<>() {
      @Override
      public void onAdd(Pod p) {
        changed();
      }

      @Override
      public void onUpdate(Pod before, Pod p) {
        if (!phase(before).equals(phase(p))
            || (before.getMetadata().getDeletionTimestamp() == null)
                != (p.getMetadata().getDeletionTimestamp() == null)) {
          changed();
        }
      }

      @Override
      public void onDelete(Pod p, boolean unknown) {
        changed();
      }
    };
  }

  private void changed() {
    Listener l = listener;
    if (l != null) {
      safely(l::changed);
    }
  }

  private static String phase(Pod p) {
    return p.getStatus() == null || p.getStatus().getPhase() == null
        ? ""
        : p.getStatus().getPhase();
  }

  /**
   * The kube-scheduler's word that a balloon made room: an Event {@code Preempted} on the victim
   * pod, with the preemptor as its related object and the message "Preempted by NS/POD on node
   * NODE" (kubernetes v1.20.2 pkg/scheduler/framework/plugins/defaultpreemption/
   * default_preemption.go, {@code PrepareCandidate}). Events the informer lists from before it
   * started (a dispatcher restarted) were told already, or are past telling.
   */
  void onEvent(Event e) {
    ObjectReference victim = e.getInvolvedObject();
    if (victim == null || !"Preempted".equals(e.getReason()) || !"Pod".equals(victim.getKind())) {
      return;
    }
    String route = BalloonFactory.routeOfPod(victim.getName());
    if (route == null) {
      return;
    }
    String uid = e.getMetadata().getUid();
    if (uid != null && !eventsSeen.add(uid)) {
      return;
    }
    if (eventsSeen.size() > 10_000) {
      synchronized (eventsSeen) {
        var it = eventsSeen.iterator();
        for (int i = 0; i < 5_000 && it.hasNext(); i++) {
          it.next();
          it.remove();
        }
      }
    }
    Instant at = when(e);
    if (at != null && watchingSince != null && at.isBefore(watchingSince)) {
      return;
    }
    Matcher m = PREEMPTED_BY.matcher(e.getMessage() == null ? "" : e.getMessage());
    boolean said = m.find();
    String node = said ? m.group(3) : null;
    ObjectReference by = e.getRelated();
    String ns = by != null ? by.getNamespace() : null;
    String podName = by != null ? by.getName() : null;
    if (podName == null && said) {
      ns = m.group(1);
      podName = m.group(2);
    }
    Optional<AttemptRef> ref = Optional.empty();
    if (podName != null) {
      Pod pod = builds.cachedPod(ns != null ? ns : victim.getNamespace(), podName);
      ref = pod != null ? ClusterWatch.refOf(pod) : attemptOfPodName(podName, ns);
    }
    Listener l = listener;
    if (l != null) {
      l.preempted(route, victim.getName(), node, ref);
    }
  }

  private static final Pattern PREEMPTED_BY =
      Pattern.compile("Preempted by ([^/\\s]+)/(\\S+) on node (\\S+)");

  /** A Job's pod is named after its Job ({@code oneshot-BUILD-ATTEMPT}) and five characters. */
  private static final Pattern JOB_POD = Pattern.compile("^oneshot-(\\d+)-(\\d+)-[a-z0-9]{5}$");

  static Optional<AttemptRef> attemptOfPodName(String pod, String ns) {
    Matcher m = JOB_POD.matcher(pod);
    if (!m.matches()) {
      return Optional.empty();
    }
    try {
      long build = Long.parseLong(m.group(1));
      int attempt = Integer.parseInt(m.group(2));
      return Optional.of(new AttemptRef(build, attempt, Attempt.nameOf(build, attempt), ns));
    } catch (NumberFormatException e) {
      return Optional.empty();
    }
  }

  private static Instant when(Event e) {
    try {
      if (e.getEventTime() != null && e.getEventTime().getTime() != null) {
        return Instant.parse(e.getEventTime().getTime());
      }
      if (e.getLastTimestamp() != null) {
        return Instant.parse(e.getLastTimestamp());
      }
      if (e.getMetadata().getCreationTimestamp() != null) {
        return Instant.parse(e.getMetadata().getCreationTimestamp());
      }
    } catch (java.time.format.DateTimeParseException ignored) {
      // an unreadable time: told, rather than lost
    }
    return null;
  }

  @Override
  public void hold(OneshotConfig.Route route, int count) {
    start();
    String ns = factory.namespace(route);
    String name = BalloonFactory.name(route.name());
    Deployment want = factory.deployment(route, count);
    Deployment have = cached(ns, name);
    try {
      if (have == null) {
        if (count == 0) {
          return;
        }
        try {
          calls.call(
              "create", () -> client.apps().deployments().inNamespace(ns).resource(want).create());
          log.info(
              "Route {}: {} (Deployment {}/{} made).", route.name(), balloons(count), ns, name);
        } catch (KubernetesClientException e) {
          if (e.getCode() != 409) {
            throw e;
          }
          // Made by a leader before this one, not yet in the informer: changed on the next count.
        }
        return;
      }
      String haveSpec =
          have.getMetadata().getAnnotations() == null
              ? null
              : have.getMetadata().getAnnotations().get(BalloonFactory.SPEC);
      String wantSpec = want.getMetadata().getAnnotations().get(BalloonFactory.SPEC);
      Integer haveReplicas = have.getSpec() == null ? null : have.getSpec().getReplicas();
      if (!wantSpec.equals(haveSpec)) {
        want.getMetadata().setResourceVersion(have.getMetadata().getResourceVersion());
        calls.call(
            "update", () -> client.apps().deployments().inNamespace(ns).resource(want).update());
        log.info(
            "Route {}: the balloons' pod changed with the route's template; {} of the new shape.",
            route.name(),
            balloons(count));
      } else if (haveReplicas == null || haveReplicas != count) {
        calls.call(
            "patch",
            () ->
                client
                    .apps()
                    .deployments()
                    .inNamespace(ns)
                    .withName(name)
                    .patch(
                        PatchContext.of(PatchType.JSON_MERGE),
                        "{\"spec\":{\"replicas\":" + count + "}}"));
        log.info(
            "Route {}: {} (were {}).",
            route.name(),
            balloons(count),
            haveReplicas == null ? 0 : haveReplicas);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static String balloons(int n) {
    return n == 1 ? "1 balloon" : n + " balloons";
  }

  @Override
  public void release(Set<String> keep) {
    List<Deployment> found = new ArrayList<>();
    if (started) {
      deployments.values().forEach(inf -> found.addAll(inf.getStore().list()));
    }
    Set<String> all = new LinkedHashSet<>(namespaces);
    for (OneshotConfig.Route r : routes) {
      all.add(factory.namespace(r));
    }
    try {
      if (!started || !namespaces.containsAll(all)) {
        for (String ns : all) {
          if (started && namespaces.contains(ns)) {
            continue;
          }
          found.addAll(
              calls
                  .call(
                      "list",
                      () ->
                          client
                              .apps()
                              .deployments()
                              .inNamespace(ns)
                              .withLabel(BalloonFactory.BALLOONS)
                              .list())
                  .getItems());
        }
      }
      for (Deployment d : found) {
        String route = d.getMetadata().getLabels().get(BalloonFactory.BALLOONS);
        if (keep.contains(route)) {
          continue;
        }
        String ns = d.getMetadata().getNamespace();
        String name = d.getMetadata().getName();
        calls.call(
            "delete", () -> client.apps().deployments().inNamespace(ns).withName(name).delete());
        log.info("Route {} keeps no balloons now: Deployment {}/{} deleted.", route, ns, name);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public Map<String, Observed> observed() {
    Map<String, Observed> out = new HashMap<>();
    if (!started) {
      return out;
    }
    for (SharedIndexInformer<Deployment> inf : deployments.values()) {
      for (Deployment d : inf.getStore().list()) {
        String route = d.getMetadata().getLabels().get(BalloonFactory.BALLOONS);
        int asked =
            d.getSpec() == null || d.getSpec().getReplicas() == null
                ? 0
                : d.getSpec().getReplicas();
        out.put(route, new Observed(asked, 0, 0));
      }
    }
    for (SharedIndexInformer<Pod> inf : pods.values()) {
      for (Pod p : inf.getStore().list()) {
        if (p.getMetadata().getDeletionTimestamp() != null) {
          continue;
        }
        String route = p.getMetadata().getLabels().get(BalloonFactory.BALLOONS);
        Observed b = out.getOrDefault(route, Observed.NONE);
        String phase = phase(p);
        if (phase.equals("Running")) {
          out.put(route, new Observed(b.asked(), b.running() + 1, b.pending()));
        } else if (phase.equals("Pending") || phase.isEmpty()) {
          out.put(route, new Observed(b.asked(), b.running(), b.pending() + 1));
        }
      }
    }
    return out;
  }

  private Deployment cached(String ns, String name) {
    SharedIndexInformer<Deployment> inf = deployments.get(ns);
    return inf == null ? null : inf.getStore().getByKey(ns + "/" + name);
  }

  private static void safely(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      log.warn("Handling a balloon event failed: {}. Will keep watching.", e.toString());
    }
  }

  void close() {
    List<SharedIndexInformer<?>> all = new ArrayList<>();
    all.addAll(deployments.values());
    all.addAll(pods.values());
    all.addAll(preemptions.values());
    all.forEach(SharedIndexInformer::stop);
    Informers.awaitStopped(all);
  }
}
