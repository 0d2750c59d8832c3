package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.Status;
import io.fabric8.kubernetes.api.model.StatusBuilder;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.oneshot.launch.LaunchOutcome;
import java.time.Duration;

/** What the Kubernetes API server's refusals mean for a launch, and how to say them. */
final class ApiErrors {
  private ApiErrors() {}

  /**
   * What a refused call means. Refused for good, failing the build at once with the API's message:
   * 422 (the Job is invalid) and 404 (the namespace does not exist). Tried again: 429 after as long
   * as the server asks, a 403 for an exceeded quota, 409 conflicts, 5xx, timeouts and calls that
   * got no answer; and a refusal of the dispatcher itself, which an operator fixes while the build
   * waits (its cluster's routes stall meanwhile, {@link Clusters}): a 401 (its credential expired
   * or was revoked) and a 403 that is not a quota (RBAC: its Role lacks a verb).
   */
  static LaunchOutcome classify(KubernetesClientException e, String where, ApiReachability api) {
    int code = e.getCode();
    String message = message(e);
    return switch (code) {
      case 422 ->
          new LaunchOutcome.Rejected("the Kubernetes API refused Job " + where + ": " + message);
      case 404 ->
          new LaunchOutcome.Rejected(
              "the Kubernetes API has no namespace for Job " + where + ": " + message);
      case 429 ->
          new LaunchOutcome.RetryLater(
              retryAfter(e), "throttled by the Kubernetes API: " + message);
      case 401 -> new LaunchOutcome.RetryLater(REFUSED_RETRY, unauthorized(api, message));
      case 403 -> {
        String credential = credentialRefused(api, e);
        String why = credential != null ? credential : forbidden(message);
        yield quota(message)
            ? new LaunchOutcome.RetryLater(
                Duration.ofSeconds(5), "waiting for quota in the Kubernetes API: " + message)
            : new LaunchOutcome.RetryLater(REFUSED_RETRY, why);
      }
      default ->
          new LaunchOutcome.RetryLater(
              null,
              code <= 0
                  ? api.describe(rootMessage(e))
                  : "the Kubernetes API answered " + code + ": " + message);
    };
  }

  /**
   * How long a launch the API refused the dispatcher itself waits before its next try, unless its
   * cluster is seen fixed sooner (then at once).
   */
  static final Duration REFUSED_RETRY = Duration.ofSeconds(30);

  /** "the Kubernetes API at … refuses the dispatcher's credentials (401 Unauthorized): …". */
  static String unauthorized(ApiReachability api, String message) {
    return api.describeRefusal(
        "refuses the dispatcher's credentials (401 Unauthorized; an expired or revoked token or"
            + " certificate): "
            + message);
  }

  /**
   * What a refusal says of the dispatcher's credential, or null when it says nothing of it: a 401,
   * or a 403 to {@code system:anonymous}, the user the API server makes of a request none of whose
   * credentials it accepts while anonymous requests are allowed (its default). A client certificate
   * its CA did not sign comes to that: the TLS client offers a certificate only when it is of a CA
   * the server names, so the request goes without one.
   */
  static String credentialRefused(ApiReachability api, KubernetesClientException e) {
    String message = message(e);
    if (e.getCode() == 401) {
      return unauthorized(api, message);
    }
    if (e.getCode() == 403 && message.contains("User \"system:anonymous\"")) {
      return api.describeRefusal(
          "takes the dispatcher for system:anonymous (it accepts none of its credentials: an"
              + " expired, revoked or unknown token, or a certificate its CA did not sign): "
              + message);
    }
    return null;
  }

  /** "forbidden by the Kubernetes API (the dispatcher's Role must allow it): …". */
  static String forbidden(String message) {
    return "forbidden by the Kubernetes API (the dispatcher's Role must allow it): " + message;
  }

  /** Whether a 403 is a ResourceQuota's ("exceeded quota: …"), which passes as builds end. */
  static boolean quota(String message) {
    return message.contains("exceeded quota");
  }

  /**
   * {@code status} with the wait a {@code Retry-After} header asks for (whole seconds), where the
   * Status itself names none. API Priority and Fairness turns a request away with the header alone
   * and a plain-text body ("Too many requests, please try again later."; kubernetes/kubernetes
   * staging/src/k8s.io/apiserver/pkg/server/filters/maxinflight.go, {@code tooManyRequests}, which
   * priority-and-fairness.go calls for a request it did not serve); a Status with {@code
   * details.retryAfterSeconds} comes from other refusals (an eviction a disruption budget blocks).
   * A header that is not a number of seconds (an HTTP date) is left alone.
   */
  static Status withRetryAfter(Status status, String header) {
    if (header == null
        || status.getDetails() != null && status.getDetails().getRetryAfterSeconds() != null) {
      return status;
    }
    int seconds;
    try {
      seconds = Integer.parseInt(header.strip());
    } catch (NumberFormatException notSeconds) {
      return status;
    }
    if (seconds < 0) {
      return status;
    }
    return new StatusBuilder(status)
        .editOrNewDetails()
        .withRetryAfterSeconds(seconds)
        .endDetails()
        .build();
  }

  private static Duration retryAfter(KubernetesClientException e) {
    Status s = e.getStatus();
    if (s != null && s.getDetails() != null && s.getDetails().getRetryAfterSeconds() != null) {
      return Duration.ofSeconds(Math.max(1, s.getDetails().getRetryAfterSeconds()));
    }
    return Duration.ofSeconds(1);
  }

  static String message(KubernetesClientException e) {
    Status s = e.getStatus();
    if (s != null && s.getMessage() != null && !s.getMessage().isBlank()) {
      return s.getMessage();
    }
    return rootMessage(e);
  }

  static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null && t.getCause() != t) {
      t = t.getCause();
    }
    return t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
  }
}
