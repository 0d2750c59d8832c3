package io.oneshot.testing;

import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A launcher whose attempts are a few lines of HTTP instead of a process: each one acquires its
 * build and completes it as succeeded, through the real runner API with the attempt's own token.
 * For load: the whole dispatch path runs, and a build costs no process start.
 */
public final class NoopLauncher implements Launcher {
  // HTTP/1.1, a connection per call in flight, as provisionerd's RunnerClient: left to its default,
  // this client upgrades to HTTP/2 and multiplexes every attempt over one connection, which the
  // API serves on one event loop, a load no real set of runners makes.
  private final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();
  private final ExecutorService runner = Executors.newVirtualThreadPerTaskExecutor();
  private final Map<String, AttemptState> states = new ConcurrentHashMap<>();
  public final AtomicInteger completed = new AtomicInteger();
  public final AtomicInteger errors = new AtomicInteger();
  private volatile AttemptEvents events = AttemptEvents.NONE;
  private final boolean runs;

  public NoopLauncher() {
    this(true);
  }

  /**
   * {@code runs} false: every attempt is accepted and nothing runs it; it stays "running" until
   * killed. What is left to measure is the dispatcher alone (scripts/bench).
   */
  public NoopLauncher(boolean runs) {
    this.runs = runs;
  }

  @Override
  public String kind() {
    return "noop";
  }

  @Override
  public LaunchOutcome launch(Attempt a) {
    if (states.putIfAbsent(a.name(), new AttemptState.Running("noop")) != null) {
      return new LaunchOutcome.AlreadyLaunched(null, "noop");
    }
    if (runs) {
      this.runner.execute(() -> run(a));
    }
    return new LaunchOutcome.Launched(null, "noop");
  }

  private void run(Attempt a) {
    int code = 1;
    try {
      post(a, "acquire", "{}");
      post(a, "complete", "{\"outcome\": \"succeeded\", \"exitCode\": 0}");
      completed.incrementAndGet();
      code = 0;
    } catch (Exception e) {
      errors.incrementAndGet();
    } finally {
      states.put(a.name(), new AttemptState.Exited(code, "noop ended"));
      events.changed(a.ref());
    }
  }

  private void post(Attempt a, String call, String body) throws Exception {
    HttpResponse<String> r =
        http.send(
            HttpRequest.newBuilder(URI.create(a.apiUrl() + "/api/v1/runner/" + call))
                .header("Authorization", "Bearer " + a.token().value())
                .header("Oneshot-Runner-Id", "noop-runner-" + a.name())
                .header("Content-Type", "application/json")
                .timeout(Duration.ofSeconds(30))
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() / 100 != 2) {
      throw new IllegalStateException(call + ": HTTP " + r.statusCode() + " " + r.body());
    }
  }

  @Override
  public AttemptState inspect(AttemptRef ref) {
    return states.getOrDefault(ref.name(), new AttemptState.Missing("never launched"));
  }

  @Override
  public void kill(AttemptRef ref, Duration grace, String reason) {
    states.remove(ref.name());
  }

  @Override
  public List<AttemptRef> attempts() {
    List<AttemptRef> out = new ArrayList<>();
    states.forEach(
        (name, s) -> {
          if (s instanceof AttemptState.Running) {
            AttemptRef.parse(name, null).ifPresent(out::add);
          }
        });
    return out;
  }

  @Override
  public void events(AttemptEvents events) {
    this.events = events;
  }

  @Override
  public void close() {
    runner.shutdownNow();
  }
}
