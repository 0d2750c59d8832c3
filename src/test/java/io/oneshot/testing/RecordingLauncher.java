package io.oneshot.testing;

import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/**
 * A launcher for dispatcher tests that need no processes: it records each launch and reports the
 * attempt running until a test ends it ({@link #exit}, {@link #vanish}) or it is killed. What
 * {@link #launch} answers can be scripted per attempt.
 */
public final class RecordingLauncher implements Launcher {
  public final List<Attempt> launched = new CopyOnWriteArrayList<>();
  public final List<AttemptRef> killed = new CopyOnWriteArrayList<>();

  /** Second runners the API refused and asked this launcher to remove: "attempt-name runner-id". */
  public final List<String> removedRunners = new CopyOnWriteArrayList<>();

  /** "launch NAME" and "kill NAME", in the order they happened. */
  public final List<String> history = new CopyOnWriteArrayList<>();

  private final Map<String, AttemptState> states = new ConcurrentHashMap<>();
  private volatile Function<Attempt, LaunchOutcome> outcome =
      a -> new LaunchOutcome.Launched(null, "recorded");
  private volatile AttemptEvents events = AttemptEvents.NONE;
  private final java.util.concurrent.atomic.AtomicInteger killsToFail =
      new java.util.concurrent.atomic.AtomicInteger();
  private final List<Runnable> whenReachable = new CopyOnWriteArrayList<>();

  private volatile int launchesAtOnce = LAUNCHES_AT_ONCE;

  /** How many launches the dispatcher may have under way here at once (set before it starts). */
  public void launchesAtOnce(int n) {
    launchesAtOnce = n;
  }

  @Override
  public int launchesAtOnce() {
    return launchesAtOnce;
  }

  /** The next {@code n} kills throw, as an API server that does not answer would make them. */
  public void failKills(int n) {
    killsToFail.set(n);
  }

  private volatile List<io.oneshot.launch.ClusterState> clusters = List.of();

  /** From now on, the clusters are said to be as {@code clusters} says. */
  public void clusters(io.oneshot.launch.ClusterState... clusters) {
    this.clusters = List.of(clusters);
  }

  @Override
  public List<io.oneshot.launch.ClusterState> clusters() {
    return clusters;
  }

  /** Tells those waiting for it that the platform answers again. */
  public void answersAgain() {
    whenReachable.forEach(Runnable::run);
  }

  @Override
  public void whenReachable(Runnable listener) {
    whenReachable.add(listener);
  }

  public void answer(Function<Attempt, LaunchOutcome> outcome) {
    this.outcome = outcome;
  }

  /** Pretends an attempt of this name is running (started by an earlier dispatcher). */
  public void running(String name) {
    states.put(name, new AttemptState.Running("found"));
  }

  /** The attempt's process ended with this exit code. */
  public void exit(String name, int code) {
    states.put(name, new AttemptState.Exited(code, "exited with code " + code));
    events.changed(AttemptRef.parse(name, null).orElseThrow());
  }

  /** The attempt is gone without a trace. */
  public void vanish(String name) {
    states.put(name, new AttemptState.Missing("vanished"));
    events.changed(AttemptRef.parse(name, null).orElseThrow());
  }

  /** The launch of this attempt of the build, once it has happened (within 10 s). */
  public Attempt awaitLaunched(long buildId, int attempt) {
    org.awaitility.Awaitility.await()
        .atMost(10, java.util.concurrent.TimeUnit.SECONDS)
        .until(
            () ->
                launched.stream().anyMatch(a -> a.buildId() == buildId && a.attempt() == attempt));
    return launched.stream()
        .filter(a -> a.buildId() == buildId && a.attempt() == attempt)
        .findFirst()
        .orElseThrow();
  }

  /** Waits (up to 10 s) until the attempt of this name has been killed. */
  public void awaitKilled(String name) {
    org.awaitility.Awaitility.await()
        .atMost(10, java.util.concurrent.TimeUnit.SECONDS)
        .until(() -> killed.stream().anyMatch(r -> r.name().equals(name)));
  }

  public Attempt last() {
    return launched.get(launched.size() - 1);
  }

  @Override
  public String kind() {
    return "recording";
  }

  @Override
  public LaunchOutcome launch(Attempt attempt) {
    LaunchOutcome o = outcome.apply(attempt);
    if (o instanceof LaunchOutcome.Launched || o instanceof LaunchOutcome.AlreadyLaunched) {
      if (states.putIfAbsent(attempt.name(), new AttemptState.Running("recorded")) == null) {
        launched.add(attempt);
        history.add("launch " + attempt.name());
      }
    }
    return o;
  }

  @Override
  public AttemptState inspect(AttemptRef ref) {
    return states.getOrDefault(ref.name(), new AttemptState.Missing("never launched"));
  }

  @Override
  public void kill(AttemptRef ref, Duration grace, String reason) {
    if (killsToFail.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
      history.add("failed kill " + ref.name());
      throw new IllegalStateException("the platform did not answer the kill of " + ref.name());
    }
    if (states.containsKey(ref.name())) {
      killed.add(ref);
      history.add("kill " + ref.name());
      states.remove(ref.name());
    }
  }

  /** How many times the attempts were listed: once a rescuer pass. */
  public final java.util.concurrent.atomic.AtomicInteger listings =
      new java.util.concurrent.atomic.AtomicInteger();

  @Override
  public List<AttemptRef> attempts() {
    listings.incrementAndGet();
    List<AttemptRef> out = new ArrayList<>();
    for (String name : states.keySet()) {
      AttemptRef.parse(name, null).ifPresent(out::add);
    }
    return out;
  }

  @Override
  public void events(AttemptEvents events) {
    this.events = events;
  }

  @Override
  public void removeRunner(
      AttemptRef ref, io.oneshot.build.Runner intruder, io.oneshot.build.Runner holder) {
    removedRunners.add(ref.name() + " " + intruder.id());
  }

  @Override
  public void close() {}

  /** What proves a runner call: the runner's word unless a test says otherwise. */
  public volatile java.util.function.Function<
          io.oneshot.launch.RunnerCall, io.oneshot.launch.RunnerProof>
      prover = StatedRunner::prove;

  @Override
  public io.oneshot.launch.RunnerProof prove(io.oneshot.launch.RunnerCall call) {
    return prover.apply(call);
  }
}
