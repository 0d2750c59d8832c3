package io.oneshot.testing;

import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.http.PoolOptions;
import io.vertx.core.http.RequestOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A launcher whose attempts are a few lines of HTTP instead of a process: each one acquires its
 * build and completes it as succeeded, through the real runner API with the attempt's own token.
 * For load: the whole dispatch path runs, and a build costs no process start.
 */
public final class NoopLauncher implements Launcher {
  /** The name of the one thread the attempts' HTTP runs on, for the benchmark's CPU figures. */
  public static final String THREAD = "noop-runners";

  // The attempts' calls run on a Vert.x instance of their own, with one event loop: on a cluster
  // they come from other machines, so here they cost as little of this one as they can (the JDK's
  // HttpClient, one virtual thread an attempt, took 0.22 ms of CPU a build against 0.04).
  private final Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1));
  // HTTP/1.1, a connection per call in flight, as provisionerd's RunnerClient: HTTP/2 would
  // multiplex every attempt over one connection, which the API serves on one event loop, a load
  // no real set of runners makes.
  private final HttpClient http = runnersClient(vertx);
  private final Context loop = vertx.getOrCreateContext();

  /** The attempts' HTTP client on {@code vertx}: HTTP/1.1, kept alive, at most 64 connections. */
  public static HttpClient runnersClient(Vertx vertx) {
    return vertx.createHttpClient(
        new HttpClientOptions()
            .setProtocolVersion(HttpVersion.HTTP_1_1)
            .setConnectTimeout(5_000)
            .setKeepAlive(true),
        new PoolOptions().setHttp1MaxSize(64).setMaxWaitQueueSize(-1));
  }

  private final Map<String, AttemptState> states = new ConcurrentHashMap<>();
  public final AtomicInteger completed = new AtomicInteger();
  public final AtomicInteger errors = new AtomicInteger();
  private volatile AttemptEvents events = AttemptEvents.NONE;
  private final boolean runs;
  private volatile int heartbeats;
  private volatile Duration heartbeatEvery = Duration.ZERO;

  /** Heartbeats answered so far, and each one's time from request to answer, in ms. */
  public final AtomicInteger heartbeatsAnswered = new AtomicInteger();

  public final Queue<Double> heartbeatMs = new ConcurrentLinkedQueue<>();

  /**
   * Each heartbeat's time from the moment it had a connection (the client's pool, shared by every
   * attempt here, can make it wait for one) to its answer, in ms.
   */
  public final Queue<Double> heartbeatOnConnectionMs = new ConcurrentLinkedQueue<>();

  public NoopLauncher() {
    this(true);
  }

  /**
   * Each attempt, between its acquire and its completion, heartbeats {@code count} times, {@code
   * every} apart, as provisionerd does while its build runs.
   */
  public NoopLauncher heartbeats(int count, Duration every) {
    this.heartbeats = count;
    this.heartbeatEvery = every;
    return this;
  }

  /**
   * {@code runs} false: every attempt is accepted and nothing runs it; it stays "running" until
   * killed. What is left to measure is the dispatcher alone (scripts/bench).
   */
  public NoopLauncher(boolean runs) {
    this.runs = runs;
    loop.runOnContext(v -> Thread.currentThread().setName(THREAD));
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
      loop.runOnContext(v -> run(a));
    }
    return new LaunchOutcome.Launched(null, "noop");
  }

  private void run(Attempt a) {
    post(a, "acquire", "{}")
        .compose(v -> heartbeat(a, heartbeats))
        .compose(v -> post(a, "complete", "{\"outcome\": \"succeeded\", \"exitCode\": 0}"))
        .onComplete(
            r -> {
              int code = 1;
              if (r.succeeded()) {
                completed.incrementAndGet();
                code = 0;
              } else {
                errors.incrementAndGet();
              }
              states.put(a.name(), new AttemptState.Exited(code, "noop ended"));
              events.changed(a.ref());
            });
  }

  /** {@code left} heartbeats, the first one interval after now. */
  private Future<Void> heartbeat(Attempt a, int left) {
    if (left == 0) {
      return Future.succeededFuture();
    }
    return vertx
        .timer(heartbeatEvery.toMillis())
        .compose(
            t -> {
              long t0 = System.nanoTime();
              long[] sent = {0};
              return post(a, "heartbeat", "{}", sent)
                  .onSuccess(
                      v -> {
                        long now = System.nanoTime();
                        heartbeatMs.add((now - t0) / 1e6);
                        heartbeatOnConnectionMs.add((now - sent[0]) / 1e6);
                        heartbeatsAnswered.incrementAndGet();
                      });
            })
        .compose(v -> heartbeat(a, left - 1));
  }

  private Future<Void> post(Attempt a, String call, String body) {
    return post(a, call, body, new long[1]);
  }

  /** {@code sentAt[0]}: when the call had its connection (System.nanoTime). */
  private Future<Void> post(Attempt a, String call, String body, long[] sentAt) {
    return http.request(
            new RequestOptions()
                .setMethod(HttpMethod.POST)
                .setAbsoluteURI(a.apiUrl() + "/api/v1/runner/" + call)
                .putHeader("Authorization", "Bearer " + a.token().value())
                .putHeader("Oneshot-Runner-Id", "noop-runner-" + a.name())
                .putHeader("Content-Type", "application/json")
                .setTimeout(Duration.ofSeconds(30).toMillis()))
        .compose(
            req -> {
              sentAt[0] = System.nanoTime();
              return req.send(Buffer.buffer(body));
            })
        .compose(
            res ->
                res.body()
                    .compose(
                        b ->
                            res.statusCode() / 100 == 2
                                ? Future.succeededFuture()
                                : Future.failedFuture(
                                    call + ": HTTP " + res.statusCode() + " " + b.toString())));
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
    vertx.close();
  }

  @Override
  public io.oneshot.launch.RunnerProof prove(io.oneshot.launch.RunnerCall call) {
    return StatedRunner.prove(call);
  }
}
