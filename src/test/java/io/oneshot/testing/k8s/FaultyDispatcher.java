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

  /** Who answers TokenReviews (the mock's CRUD would store them and answer with no status). */
  private volatile ServiceAccountTokens tokens;

  void tokenReviews(ServiceAccountTokens tokens) {
    tokens.pods(this::storedPod);
    this.tokens = tokens;
  }

  /** A pod as the mock's store holds it, read without a request over HTTP; null when none. */
  private io.fabric8.kubernetes.api.model.Pod storedPod(String ns, String name) {
    MockResponse r =
        crud.dispatch(
            new RecordedRequest(
                "HTTP/1.1",
                io.fabric8.mockwebserver.dsl.HttpMethod.GET,
                "/api/v1/namespaces/" + ns + "/pods/" + name,
                io.fabric8.mockwebserver.http.Headers.builder().build(),
                new io.fabric8.mockwebserver.http.Buffer()));
    if (r.code() != 200) {
      return null;
    }
    return io.fabric8.kubernetes.client.utils.Serialization.unmarshal(
        new String(r.getBody().getBytes(), java.nio.charset.StandardCharsets.UTF_8),
        io.fabric8.kubernetes.api.model.Pod.class);
  }

  private final List<Fault> faults = new CopyOnWriteArrayList<>();
  private volatile double chaos;
  private volatile String chaosAgent;
  private final java.util.Random random = new java.util.Random(11);
  public final java.util.concurrent.atomic.AtomicInteger chaosAnswers =
      new java.util.concurrent.atomic.AtomicInteger();
  public final List<Request> requests = new CopyOnWriteArrayList<>();

  /** One request as the server received it; {@code body} is kept for DELETEs (DeleteOptions). */
  public record Request(String userAgent, String method, String path, String body) {}

  /**
   * The DeleteOptions of the last DELETE of this object's path (no query), when it sent any: what a
   * controller reads as the propagation policy and grace period.
   */
  public java.util.Optional<com.fasterxml.jackson.databind.JsonNode> lastDeleteOptions(
      String objectPath) {
    for (int i = requests.size() - 1; i >= 0; i--) {
      Request r = requests.get(i);
      if (r.method().equals("DELETE") && r.path().replaceFirst("\\?.*", "").equals(objectPath)) {
        if (r.body() == null || r.body().isBlank()) {
          return java.util.Optional.empty();
        }
        try {
          return java.util.Optional.of(
              new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body()));
        } catch (java.io.IOException e) {
          return java.util.Optional.empty();
        }
      }
    }
    return java.util.Optional.empty();
  }

  public FaultyDispatcher(Dispatcher crud) {
    this.crud = crud;
  }

  public void add(Fault f) {
    faults.add(f);
  }

  /** Bearer tokens no longer accepted ({@link #revoke}). */
  private final java.util.Set<String> revoked = java.util.concurrent.ConcurrentHashMap.newKeySet();

  /**
   * From now on a request with this bearer token is refused as kube-apiserver v1.20.2 refuses one
   * no authenticator accepts (staging/src/k8s.io/apiserver/pkg/endpoints/filters/authentication.go,
   * {@code WithAuthentication}: {@code unauthorized}, a 401 Status with reason and message
   * "Unauthorized"), whatever it asks: an expired or revoked credential.
   */
  public void revoke(String token) {
    revoked.add(token);
  }

  /** Answers every request it matches until {@link #remove}d (not only the first). */
  public void addLasting(Fault f) {
    lasting.add(f);
  }

  /** The lasting fault is answered no more: requests go to the store again. */
  public void remove(Fault f) {
    lasting.remove(f);
  }

  private final List<Fault> lasting = new CopyOnWriteArrayList<>();

  /** Namespaces where the dispatcher's account may do nothing ({@link #deny}). */
  private final java.util.Set<String> denied = java.util.concurrent.ConcurrentHashMap.newKeySet();

  /**
   * From now on the dispatcher's account may do nothing in {@code namespace} ({@link
   * #CLUSTER_WIDE}: nothing cluster-scoped), as its SelfSubjectAccessReviews are answered; {@link
   * #allow} undoes it. (Its other requests there are the test's to refuse, with a lasting fault.)
   */
  public void deny(String namespace) {
    denied.add(namespace);
  }

  public void allow(String namespace) {
    denied.remove(namespace);
  }

  /** What {@link #deny} takes for the reviews of cluster-scoped resources (no namespace). */
  public static final String CLUSTER_WIDE = "";

  /**
   * A SelfSubjectAccessReview answered as kube-apiserver v1.20.2 answers one
   * (pkg/registry/authorization/selfsubjectaccessreview/rest.go, {@code Create}: the review as
   * sent, with what the authorizer decided in {@code status}; 201). The mock's store would refuse
   * it (422: it has no name). Allowed unless its namespace is {@link #deny}ed, where RBAC has no
   * opinion: {@code allowed} false, no reason.
   */
  private MockResponse review(RecordedRequest request) {
    var review =
        io.fabric8.kubernetes.client.utils.Serialization.unmarshal(
            request.getUtf8Body(),
            io.fabric8.kubernetes.api.model.authorization.v1.SelfSubjectAccessReview.class);
    var attrs = review.getSpec() == null ? null : review.getSpec().getResourceAttributes();
    boolean allowed =
        attrs == null
            || !denied.contains(attrs.getNamespace() == null ? CLUSTER_WIDE : attrs.getNamespace());
    review.setStatus(
        new io.fabric8.kubernetes.api.model.authorization.v1.SubjectAccessReviewStatus(
            allowed, false, null, ""));
    return new MockResponse()
        .setResponseCode(201)
        .setHeader("Content-Type", "application/json")
        .setBody(io.fabric8.kubernetes.client.utils.Serialization.asJson(review));
  }

  private volatile List<String> droppedJobFields = List.of();

  /**
   * From now on, Jobs are stored without these fields of their spec, as by an API server that does
   * not know them (too old, or a feature gate off); {@code backoffLimit} is stored as its default,
   * 6.
   */
  public void dropJobSpecFields(String... fields) {
    droppedJobFields = List.of(fields);
  }

  private static final Pattern JOBS =
      Pattern.compile("^/apis/batch/v1/namespaces/[^/]+/jobs($|\\?)");

  private RecordedRequest withoutDroppedFields(RecordedRequest request) {
    try {
      var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
      var job =
          (com.fasterxml.jackson.databind.node.ObjectNode)
              mapper.readTree(request.getBody().getBytes());
      var spec = (com.fasterxml.jackson.databind.node.ObjectNode) job.path("spec");
      for (String f : droppedJobFields) {
        if (f.equals("backoffLimit")) {
          spec.put(f, 6);
        } else {
          spec.remove(f);
        }
      }
      return new RecordedRequest(
          request.getHttpVersion(),
          request.method(),
          request.getPath(),
          request.getHeaders(),
          new io.fabric8.mockwebserver.http.Buffer(mapper.writeValueAsBytes(job)));
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
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
        new Request(
            request.getHeader("User-Agent"),
            request.getMethod(),
            request.getPath(),
            request.getMethod().equals("DELETE") ? request.getUtf8Body() : null));
    if (!droppedJobFields.isEmpty()
        && request.getMethod().equals("POST")
        && JOBS.matcher(request.getPath()).find()) {
      request = withoutDroppedFields(request);
    }
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
    String auth = request.getHeader("Authorization");
    if (auth != null && auth.startsWith("Bearer ") && revoked.contains(auth.substring(7))) {
      return new MockResponse()
          .setResponseCode(401)
          .setHeader("Content-Type", "application/json")
          .setBody(status(401, "Unauthorized", "Unauthorized", null));
    }
    for (Fault f : lasting) {
      if (f.method().equals(request.getMethod()) && f.path().matcher(request.getPath()).find()) {
        return f.answer().apply(request, crud);
      }
    }
    if (request.getMethod().equals("POST")
        && request.getPath().startsWith("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")) {
      return review(request);
    }
    ServiceAccountTokens t = tokens;
    if (t != null
        && request.getMethod().equals("POST")
        && request.getPath().startsWith(ServiceAccountTokens.PATH)) {
      return t.review(request);
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
    return tooManyRequests(
        method,
        path,
        seconds,
        "application/json",
        status(429, "TooManyRequests", "too many requests", seconds));
  }

  /**
   * Answers 429 as API Priority and Fairness turns a request away: a {@code Retry-After} header of
   * {@code seconds} and a plain-text body, no Status (kubernetes/kubernetes
   * staging/src/k8s.io/apiserver/pkg/server/filters/maxinflight.go, {@code tooManyRequests}, called
   * by priority-and-fairness.go for a request it did not serve).
   */
  public static Fault turnedAwayByPriorityAndFairness(String method, String path, int seconds) {
    return tooManyRequests(
        method,
        path,
        seconds,
        "text/plain; charset=utf-8",
        "Too many requests, please try again later.\n");
  }

  private static Fault tooManyRequests(
      String method, String path, int seconds, String contentType, String body) {
    return new Fault(
        method,
        Pattern.compile(path),
        (req, crud) ->
            new MockResponse()
                .setResponseCode(429)
                .setHeader("Content-Type", contentType)
                .setHeader("Retry-After", seconds)
                .setBody(body));
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
