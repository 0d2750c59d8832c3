package io.oneshot.testing.k8s;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.authentication.TokenReview;
import io.fabric8.kubernetes.api.model.authentication.TokenReviewStatus;
import io.fabric8.kubernetes.api.model.authentication.UserInfo;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.fabric8.mockwebserver.http.MockResponse;
import io.fabric8.mockwebserver.http.RecordedRequest;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The API server's bound ServiceAccount tokens, for the mock API: the test kubelet gets one for a
 * pod's projected {@code serviceAccountToken} volume source, and {@code POST
 * /apis/authentication.k8s.io/v1/tokenreviews} reviews one as kube-apiserver v1.20.2 does:
 *
 * <ul>
 *   <li>pkg/registry/authentication/tokenreview/storage.go, {@code REST.Create}: a review without a
 *       token is a 400; the spec's audiences (the API server's own when none) go to the
 *       authenticator; its error is {@code status.error} with {@code authenticated: false}; the
 *       user, its extra and the audiences it matched fill {@code status};
 *   <li>pkg/serviceaccount/jwt.go, {@code AuthenticateToken}: the token's audiences intersected
 *       with the requested ones; none in common is "token audiences %q is invalid for the target
 *       audiences %q";
 *   <li>pkg/serviceaccount/claims.go, {@code validator.Validate}: an expired token is "Token has
 *       expired."; a token bound to a pod that is gone, or whose deletion began more than 60 s ago,
 *       is "Token has been invalidated"; a pod UID other than the claim's is "Pod UID (%s) does not
 *       match claim (%s)";
 *   <li>staging/src/k8s.io/apiserver/pkg/authentication/serviceaccount/util.go, {@code UserInfo}:
 *       the user {@code system:serviceaccount:<ns>:<name>}, its groups, and the pod's name and UID
 *       in {@code extra}.
 * </ul>
 *
 * A token nobody issued is "invalid bearer token" (the union of authenticators finds no one that
 * takes it). Tokens are opaque here, not JWTs: nothing in oneshot reads inside them.
 */
public final class ServiceAccountTokens {
  static final String PATH = "/apis/authentication.k8s.io/v1/tokenreviews";

  /** The API server's own audience (its {@code --service-account-issuer}). */
  static final String API_AUDIENCE = "https://kubernetes.default.svc.cluster.local";

  private record Claims(
      String namespace,
      String serviceAccount,
      String pod,
      String podUid,
      List<String> audiences,
      Instant expires) {}

  private final Map<String, Claims> issued = new ConcurrentHashMap<>();
  private final SecureRandom random = new SecureRandom();

  /**
   * Reads a pod (namespace, name) from the mock's store, or null: from the thread answering a
   * review, which a request to the mock over HTTP would wait for (it answers one at a time).
   */
  private volatile java.util.function.BiFunction<String, String, Pod> pods = (ns, name) -> null;

  ServiceAccountTokens() {}

  void pods(java.util.function.BiFunction<String, String, Pod> pods) {
    this.pods = pods;
  }

  /** A token of the pod's service account for {@code audience}, bound to the pod. */
  public String issue(Pod pod, String audience, long expirationSeconds) {
    byte[] b = new byte[32];
    random.nextBytes(b);
    String token = "fake-sa-token." + Base64.getUrlEncoder().withoutPadding().encodeToString(b);
    String sa = pod.getSpec().getServiceAccountName();
    issued.put(
        token,
        new Claims(
            pod.getMetadata().getNamespace(),
            sa == null || sa.isEmpty() ? "default" : sa,
            pod.getMetadata().getName(),
            pod.getMetadata().getUid(),
            List.of(audience == null || audience.isEmpty() ? API_AUDIENCE : audience),
            Instant.now().plusSeconds(expirationSeconds)));
    return token;
  }

  /** The answer to a POST of a TokenReview. */
  MockResponse review(RecordedRequest request) {
    TokenReview review = Serialization.unmarshal(request.getUtf8Body(), TokenReview.class);
    if (review.getSpec() == null
        || review.getSpec().getToken() == null
        || review.getSpec().getToken().isEmpty()) {
      return new MockResponse()
          .setResponseCode(400)
          .setBody(
              "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
                  + "\"token is required for TokenReview in authentication\",\"reason\":"
                  + "\"BadRequest\",\"code\":400}");
    }
    List<String> wanted =
        review.getSpec().getAudiences() == null || review.getSpec().getAudiences().isEmpty()
            ? List.of(API_AUDIENCE)
            : review.getSpec().getAudiences();
    TokenReviewStatus status = new TokenReviewStatus();
    status.setAuthenticated(false);
    Claims c = issued.get(review.getSpec().getToken());
    if (c == null) {
      status.setError("invalid bearer token");
    } else {
      List<String> auds = new ArrayList<>(c.audiences());
      auds.retainAll(wanted);
      String invalid = invalid(c);
      if (auds.isEmpty()) {
        status.setError(
            "token audiences "
                + quoted(c.audiences())
                + " is invalid for the target audiences "
                + quoted(wanted));
      } else if (invalid != null) {
        status.setError(invalid);
      } else {
        status.setAuthenticated(true);
        UserInfo user = new UserInfo();
        user.setUsername("system:serviceaccount:" + c.namespace() + ":" + c.serviceAccount());
        user.setGroups(
            List.of(
                "system:serviceaccounts",
                "system:serviceaccounts:" + c.namespace(),
                "system:authenticated"));
        user.setExtra(
            Map.of(
                "authentication.kubernetes.io/pod-name", List.of(c.pod()),
                "authentication.kubernetes.io/pod-uid", List.of(c.podUid())));
        status.setUser(user);
        status.setAudiences(auds);
      }
    }
    review.setStatus(status);
    review.setApiVersion("authentication.k8s.io/v1");
    review.setKind("TokenReview");
    return new MockResponse().setResponseCode(201).setBody(Serialization.asJson(review));
  }

  /** Why claims.go's validator refuses the token now, or null. */
  private String invalid(Claims c) {
    if (Instant.now().isAfter(c.expires())) {
      return "Token has expired.";
    }
    Pod pod = pods.apply(c.namespace(), c.pod());
    if (pod == null) {
      return "Token has been invalidated";
    }
    String deletion = pod.getMetadata().getDeletionTimestamp();
    if (deletion != null && Instant.parse(deletion).isBefore(Instant.now().minusSeconds(60))) {
      return "Token has been invalidated";
    }
    if (!c.podUid().equals(pod.getMetadata().getUid())) {
      return "Pod UID ("
          + pod.getMetadata().getUid()
          + ") does not match claim ("
          + c.podUid()
          + ")";
    }
    return null;
  }

  private static String quoted(List<String> l) {
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < l.size(); i++) {
      b.append(i == 0 ? "" : " ").append('"').append(l.get(i)).append('"');
    }
    return b.append(']').toString();
  }
}
