package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.Status;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.oneshot.launch.LaunchOutcome;
import java.time.Duration;

/** What the Kubernetes API server's refusals mean for a launch, and how to say them. */
final class ApiErrors {
  private ApiErrors() {}

  /**
   * What a refused call means: 422 (the API server says the Job is invalid) can never succeed; 429
   * waits as long as the server asks; 403 (forbidden, or a quota exceeded), 5xx, timeouts and
   * broken connections are retried with backoff.
   */
  static LaunchOutcome classify(KubernetesClientException e, String where) {
    int code = e.getCode();
    String message = message(e);
    return switch (code) {
      case 422 ->
          new LaunchOutcome.Rejected("the Kubernetes API refused Job " + where + ": " + message);
      case 429 ->
          new LaunchOutcome.RetryLater(
              retryAfter(e), "throttled by the Kubernetes API: " + message);
      case 403 ->
          new LaunchOutcome.RetryLater(
              Duration.ofSeconds(5), "forbidden by the Kubernetes API (quota or RBAC): " + message);
      default ->
          new LaunchOutcome.RetryLater(
              null,
              (code == 0
                      ? "cannot reach the Kubernetes API"
                      : "the Kubernetes API answered " + code)
                  + ": "
                  + message);
    };
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
