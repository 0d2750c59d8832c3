package io.oneshot.testing.k8s;

import io.fabric8.mockwebserver.http.Dispatcher;
import io.fabric8.mockwebserver.http.MockResponse;
import io.fabric8.mockwebserver.http.RecordedRequest;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BiFunction;
import java.util.regex.Pattern;

/**
 * The mock API server's dispatcher with faults on demand: each fault answers the next request it
 * matches (method and path), once, in place of (or around) the CRUD dispatcher. Every request is
 * recorded with the client's User-Agent, so that the dispatcher's calls can be told from the fake
 * kubelet's.
 */
public final class FaultyDispatcher extends Dispatcher {
  /** One scripted fault. */
  public record Fault(
      String method, Pattern path, BiFunction<RecordedRequest, Dispatcher, MockResponse> answer) {}

  private final Dispatcher crud;
  private final List<Fault> faults = new CopyOnWriteArrayList<>();
  private volatile double chaos;
  private volatile String chaosAgent;
  private final java.util.Random random = new java.util.Random(11);
  public final java.util.concurrent.atomic.AtomicInteger chaosAnswers =
      new java.util.concurrent.atomic.AtomicInteger();
  public final List<Request> requests = new CopyOnWriteArrayList<>();

  /** One request as the server received it. */
  public record Request(String userAgent, String method, String path) {}

  public FaultyDispatcher(Dispatcher crud) {
    this.crud = crud;
  }

  public void add(Fault f) {
    faults.add(f);
  }

  /**
   * From now on, answers this share of the requests of clients with {@code userAgent} (but watches)
   * with a fault picked at random: 500, 429 with Retry-After, 503, or the work done and the answer
   * lost past the client's timeout.
   */
  public void chaos(double share, String userAgent) {
    this.chaosAgent = userAgent;
    this.chaos = share;
  }

  @Override
  public MockResponse dispatch(RecordedRequest request) {
    requests.add(
        new Request(request.getHeader("User-Agent"), request.getMethod(), request.getPath()));
    if (chaos > 0
        && chaosAgent.equals(request.getHeader("User-Agent"))
        && !request.getPath().contains("watch=true")) {
      double roll;
      int pick;
      synchronized (random) {
        roll = random.nextDouble();
        pick = random.nextInt(4);
      }
      if (roll < chaos) {
        chaosAnswers.incrementAndGet();
        String path = "^" + Pattern.quote(request.getPath().replaceFirst("\\?.*", "")) + "($|\\?)";
        Fault f =
            switch (pick) {
              case 0 -> error(request.getMethod(), path, 500, "InternalError", "chaos");
              case 1 -> throttle(request.getMethod(), path, 1);
              case 2 -> error(request.getMethod(), path, 503, "ServiceUnavailable", "chaos");
              default -> doneButLost(request.getMethod(), path, Duration.ofSeconds(5));
            };
        return f.answer().apply(request, crud);
      }
    }
    for (Fault f : faults) {
      if (f.method().equals(request.getMethod()) && f.path().matcher(request.getPath()).find()) {
        if (faults.remove(f)) {
          return f.answer().apply(request, crud);
        }
      }
    }
    return crud.dispatch(request);
  }

  @Override
  public void shutdown() {
    crud.shutdown();
  }

  private static String status(int code, String reason, String message, Integer retryAfter) {
    return "{\"kind\": \"Status\", \"apiVersion\": \"v1\", \"status\": \"Failure\", \"code\": "
        + code
        + ", \"reason\": \""
        + reason
        + "\", \"message\": \""
        + message
        + "\""
        + (retryAfter == null ? "" : ", \"details\": {\"retryAfterSeconds\": " + retryAfter + "}")
        + "}";
  }

  /** Answers with an API error and does nothing. */
  public static Fault error(String method, String path, int code, String reason, String message) {
    return new Fault(
        method,
        Pattern.compile(path),
        (req, crud) ->
            new MockResponse()
                .setResponseCode(code)
                .setHeader("Content-Type", "application/json")
                .setBody(status(code, reason, message, null)));
  }

  /** Answers 429 asking the client to come back in {@code seconds}. */
  public static Fault throttle(String method, String path, int seconds) {
    return new Fault(
        method,
        Pattern.compile(path),
        (req, crud) ->
            new MockResponse()
                .setResponseCode(429)
                .setHeader("Content-Type", "application/json")
                .setHeader("Retry-After", seconds)
                .setBody(status(429, "TooManyRequests", "too many requests", seconds)));
  }

  /**
   * Carries the request out, then holds the answer back past the client's timeout: the server did
   * the work, the client never hears it (a connection lost after the POST was received).
   */
  public static Fault doneButLost(String method, String path, Duration hold) {
    return new Fault(
        method, Pattern.compile(path), (req, crud) -> crud.dispatch(req).setBodyDelay(hold));
  }
}
