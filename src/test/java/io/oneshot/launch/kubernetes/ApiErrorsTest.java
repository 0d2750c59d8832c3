package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Status;
import io.fabric8.kubernetes.api.model.StatusBuilder;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.oneshot.launch.LaunchOutcome;
import java.net.ConnectException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** What each refusal of the API server means for a launch: fail at once, or wait and retry. */
class ApiErrorsTest {
  private final ApiReachability api = new ApiReachability("https://10.0.0.1:6443/");

  private static KubernetesClientException answered(int code, String message) {
    Status s = new StatusBuilder().withCode(code).withMessage(message).build();
    return new KubernetesClientException(s);
  }

  private LaunchOutcome classify(KubernetesClientException e) {
    return ApiErrors.classify(e, "team-a/oneshot-7-1", api);
  }

  @Test
  void aRoleWithoutTheVerbWaitsForTheOperatorToFixIt() {
    assertThat(classify(answered(403, "jobs.batch is forbidden: User x cannot create jobs")))
        .isEqualTo(
            new LaunchOutcome.RetryLater(
                ApiErrors.REFUSED_RETRY,
                "forbidden by the Kubernetes API (the dispatcher's Role must allow it): jobs.batch"
                    + " is forbidden: User x cannot create jobs"));
  }

  @Test
  void refusedCredentialsWaitForTheirRotation() {
    assertThat(classify(answered(401, "Unauthorized")))
        .isEqualTo(
            new LaunchOutcome.RetryLater(
                ApiErrors.REFUSED_RETRY,
                api.describeRefusal(
                    "refuses the dispatcher's credentials (401 Unauthorized; an expired or revoked"
                        + " token or certificate): Unauthorized")));
  }

  /**
   * A request none of whose credentials the API server accepts, while it allows anonymous requests
   * (its default), is made as system:anonymous: RBAC's 403 then says nothing of a Role but of the
   * credential, as kube-apiserver v1.20.2 words it (an unknown client certificate is not even
   * offered by the TLS client; seen on the second control plane in TwoClustersTest).
   */
  @Test
  void aRequestMadeAsNobodyIsACredentialRefusedNotARoleMissingAVerb() {
    String message =
        "jobs.batch is forbidden: User \"system:anonymous\" cannot create resource \"jobs\" in API"
            + " group \"batch\" in the namespace \"team-a\"";
    String refused =
        api.describeRefusal(
            "takes the dispatcher for system:anonymous (it accepts none of its credentials: an"
                + " expired, revoked or unknown token, or a certificate its CA did not sign): "
                + message);
    assertThat(ApiErrors.credentialRefused(api, answered(403, message))).isEqualTo(refused);
    assertThat(classify(answered(403, message)))
        .isEqualTo(new LaunchOutcome.RetryLater(ApiErrors.REFUSED_RETRY, refused));
    assertThat(
            ApiErrors.credentialRefused(
                api, answered(403, "jobs.batch is forbidden: User \"x\" cannot create jobs")))
        .isNull();
    assertThat(ApiErrors.credentialRefused(api, answered(401, "Unauthorized")))
        .isEqualTo(ApiErrors.unauthorized(api, "Unauthorized"));
  }

  @Test
  void anExceededQuotaWaitsForBuildsToEnd() {
    assertThat(classify(answered(403, "exceeded quota: builds, requested: pods=1")))
        .isEqualTo(
            new LaunchOutcome.RetryLater(
                Duration.ofSeconds(5),
                "waiting for quota in the Kubernetes API: exceeded quota: builds, requested:"
                    + " pods=1"));
  }

  @Test
  void aMissingNamespaceOrAnInvalidJobFailsTheBuildAtOnce() {
    assertThat(classify(answered(404, "namespaces \"team-a\" not found")))
        .isInstanceOf(LaunchOutcome.Rejected.class)
        .extracting(o -> ((LaunchOutcome.Rejected) o).reason())
        .isEqualTo(
            "the Kubernetes API has no namespace for Job team-a/oneshot-7-1: namespaces"
                + " \"team-a\" not found");
    assertThat(classify(answered(422, "spec.template: Required value")))
        .isInstanceOf(LaunchOutcome.Rejected.class);
  }

  @Test
  void aCallWithNoAnswerSaysWhichApiCannotBeReached() {
    KubernetesClientException refused =
        new KubernetesClientException(
            "An error has occurred.", new ConnectException("Connection refused"));
    assertThat(classify(refused))
        .isEqualTo(
            new LaunchOutcome.RetryLater(
                null,
                "cannot reach the Kubernetes API at https://10.0.0.1:6443/: Connection refused"));
  }

  @Test
  void serverErrorsAndThrottlingAreRetried() {
    assertThat(classify(answered(503, "etcd is unavailable")))
        .isEqualTo(
            new LaunchOutcome.RetryLater(
                null, "the Kubernetes API answered 503: etcd is unavailable"));
    assertThat(classify(answered(429, "slow down"))).isInstanceOf(LaunchOutcome.RetryLater.class);
  }

  @Test
  void aThrottledLaunchWaitsAsLongAsTheRetryAfterHeaderAsks() {
    // API Priority and Fairness: the header alone, the body plain text (no Status details).
    Status plain = new StatusBuilder().withCode(429).withMessage("Too many requests").build();
    assertThat(classify(new KubernetesClientException(ApiErrors.withRetryAfter(plain, "7"))))
        .isEqualTo(
            new LaunchOutcome.RetryLater(
                Duration.ofSeconds(7), "throttled by the Kubernetes API: Too many requests"));
    assertThat(classify(new KubernetesClientException(plain)))
        .as("without the header: a second")
        .isEqualTo(
            new LaunchOutcome.RetryLater(
                Duration.ofSeconds(1), "throttled by the Kubernetes API: Too many requests"));
  }

  @Test
  void aRetryAfterInTheStatusWinsOverTheHeaderAndAHeaderThatIsNotSecondsIsLeftAlone() {
    Status detailed =
        new StatusBuilder()
            .withCode(429)
            .withNewDetails()
            .withRetryAfterSeconds(3)
            .endDetails()
            .build();
    assertThat(ApiErrors.withRetryAfter(detailed, "9").getDetails().getRetryAfterSeconds())
        .isEqualTo(3);
    Status plain = new StatusBuilder().withCode(429).build();
    assertThat(ApiErrors.withRetryAfter(plain, "Wed, 21 Oct 2026 07:28:00 GMT")).isEqualTo(plain);
    assertThat(ApiErrors.withRetryAfter(plain, "-1")).isEqualTo(plain);
    assertThat(ApiErrors.withRetryAfter(plain, null)).isEqualTo(plain);
    assertThat(ApiErrors.withRetryAfter(plain, " 2 ").getDetails().getRetryAfterSeconds())
        .isEqualTo(2);
  }

  @Test
  void reachabilityFollowsAnswersAndTellsListenersOnceWhenItReturns() {
    int[] told = {0};
    api.whenReachable(() -> told[0]++);
    assertThat(api.state().reachable()).isTrue();
    api.unanswered("Connection refused");
    api.unanswered("Connection refused");
    assertThat(api.state().reachable()).isFalse();
    assertThat(api.state().detail())
        .isEqualTo("cannot reach the Kubernetes API at https://10.0.0.1:6443/: Connection refused");
    api.answered();
    api.answered();
    assertThat(api.state().reachable()).isTrue();
    assertThat(told[0]).isEqualTo(1);
  }
}
