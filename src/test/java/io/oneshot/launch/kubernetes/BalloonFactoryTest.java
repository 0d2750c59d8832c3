package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A route's balloons: the shape of its build pods, and nothing of a build. */
class BalloonFactoryTest {
  private static final KubernetesSerialization SER = new KubernetesSerialization();
  @TempDir Path dir;

  private static final String TEMPLATE =
      """
      apiVersion: batch/v1
      kind: Job
      metadata:
        labels: {team: gpu}
      spec:
        template:
          metadata:
            labels: {team: gpu}
            annotations: {sidecar.example/inject: "true"}
          spec:
            serviceAccountName: oneshot-build
            priorityClassName: builds
            hostNetwork: true
            nodeSelector: {pool: gpu}
            tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
            affinity:
              nodeAffinity:
                requiredDuringSchedulingIgnoredDuringExecution:
                  nodeSelectorTerms:
                    - matchExpressions: [{key: zone, operator: In, values: [a, b]}]
            imagePullSecrets: [{name: registry}]
            securityContext: {runAsUser: 10001}
            initContainers:
              - name: fetch
                image: example/fetch:1
                resources: {requests: {cpu: "3", memory: 128Mi}}
            containers:
              - name: provisionerd
                image: example/oneshot:2
                imagePullPolicy: IfNotPresent
                args: [provisionerd]
                env: [{name: SECRET, value: x}]
                resources:
                  requests: {cpu: 500m, memory: 1Gi}
                  limits: {memory: 2Gi, nvidia.com/gpu: "1"}
                volumeMounts: [{name: work, mountPath: /work}]
              - name: cache
                image: example/cache:1
                resources: {requests: {cpu: 250m, memory: 512Mi}}
            volumes: [{name: work, emptyDir: {}}]
      """;

  private Deployment balloons(String warm, int replicas) throws Exception {
    Files.writeString(dir.resolve("gpu.yaml"), TEMPLATE);
    OneshotConfig c =
        ConfigLoader.parse(
            "api: {publicUrl: \"http://oneshot:8080\"}\n"
                + "launcher: {kind: kubernetes}\n"
                + "routes: [{name: gpu-a, template: gpu.yaml, namespace: team-a, warm: "
                + warm
                + "}]",
            "t",
            Map.of());
    BalloonFactory f =
        new BalloonFactory(
            JobTemplates.load(dir, c.routes(), SER), "builds", "oneshot-balloon", SER);
    return f.deployment(c.routes().get(0), replicas);
  }

  @Test
  void aBalloonHasItsRoutesPlaceImageAndRoomAndNothingOfABuild() throws Exception {
    Deployment d = balloons("{idle: 2}", 3);
    assertThat(d.getMetadata().getName()).isEqualTo("oneshot-balloons-gpu-a");
    assertThat(d.getMetadata().getNamespace()).isEqualTo("team-a");
    assertThat(d.getSpec().getReplicas()).isEqualTo(3);
    assertThat(d.getSpec().getSelector().getMatchLabels())
        .isEqualTo(Map.of("oneshot.io/balloons", "gpu-a"));
    assertThat(d.getSpec().getTemplate().getMetadata().getLabels())
        .containsEntry("oneshot.io/balloons", "gpu-a")
        .containsEntry("app.kubernetes.io/managed-by", "oneshot")
        .doesNotContainKeys("team", "oneshot.io/build");
    assertThat(d.getSpec().getTemplate().getMetadata().getAnnotations()).isNullOrEmpty();
    PodSpec pod = d.getSpec().getTemplate().getSpec();
    // Where the route's builds land.
    assertThat(pod.getNodeSelector()).isEqualTo(Map.of("pool", "gpu"));
    assertThat(pod.getTolerations()).hasSize(1);
    assertThat(pod.getAffinity().getNodeAffinity()).isNotNull();
    assertThat(pod.getHostNetwork()).isTrue();
    assertThat(pod.getImagePullSecrets()).hasSize(1);
    // Below every build, gone at once when preempted, no token, no volumes.
    assertThat(pod.getPriorityClassName()).isEqualTo("oneshot-balloon");
    assertThat(pod.getTerminationGracePeriodSeconds()).isZero();
    assertThat(pod.getAutomountServiceAccountToken()).isFalse();
    assertThat(pod.getVolumes()).isNullOrEmpty();
    assertThat(pod.getInitContainers()).isNullOrEmpty();
    assertThat(pod.getSecurityContext().getRunAsNonRoot()).isTrue();
    assertThat(pod.getSecurityContext().getRunAsUser()).isEqualTo(10001L);
    assertThat(pod.getContainers()).hasSize(1);
    Container c = pod.getContainers().get(0);
    assertThat(c.getImage()).isEqualTo("example/oneshot:2");
    assertThat(c.getImagePullPolicy()).isEqualTo("IfNotPresent");
    assertThat(c.getCommand()).isEqualTo(OneshotConfig.Warm.DEFAULT_COMMAND);
    assertThat(c.getEnv()).isNullOrEmpty();
    assertThat(c.getVolumeMounts()).isNullOrEmpty();
    assertThat(c.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
    assertThat(c.getSecurityContext().getCapabilities().getDrop()).containsExactly("ALL");
    // The room: cpu 3 (the init container's, more than 500m + 250m), memory 1Gi + 512Mi, the GPU
    // its limit; asked as requests and limits alike.
    Map<String, Quantity> req = c.getResources().getRequests();
    assertThat(req.get("cpu").getNumericalAmount()).isEqualByComparingTo("3");
    assertThat(req.get("memory").getNumericalAmount())
        .isEqualByComparingTo(String.valueOf(1536L << 20));
    assertThat(req.get("nvidia.com/gpu").getNumericalAmount()).isEqualByComparingTo("1");
    assertThat(c.getResources().getLimits()).isEqualTo(req);
  }

  @Test
  void theRoutesCommandRunsAndAChangedShapeChangesTheDigest() throws Exception {
    Deployment d = balloons("{idle: 1, command: [/pause]}", 1);
    assertThat(d.getSpec().getTemplate().getSpec().getContainers().get(0).getCommand())
        .containsExactly("/pause");
    String digest = d.getMetadata().getAnnotations().get("oneshot.io/balloon-spec");
    assertThat(balloons("{idle: 1, command: [/pause]}", 5).getMetadata().getAnnotations())
        .as("the count is no part of the shape")
        .containsEntry("oneshot.io/balloon-spec", digest);
    assertThat(
            balloons("{idle: 1}", 1).getMetadata().getAnnotations().get("oneshot.io/balloon-spec"))
        .isNotEqualTo(digest);
  }

  @Test
  void aBalloonPodsNameGivesItsRoute() {
    assertThat(BalloonFactory.routeOfPod("oneshot-balloons-gpu-a-5d8f7c9b4-x2k9q"))
        .isEqualTo("gpu-a");
    assertThat(BalloonFactory.routeOfPod("oneshot-balloons-a-5d8f7c9b4-x2k9q")).isEqualTo("a");
    assertThat(BalloonFactory.routeOfPod("oneshot-12-1-x2k9q")).isNull();
    assertThat(BalloonFactory.routeOfPod("oneshot-balloons-x")).isNull();
    assertThat(Balloons.attemptOfPodName("oneshot-12-3-x2k9q", "ns"))
        .hasValueSatisfying(r -> assertThat(r.buildId()).isEqualTo(12));
    assertThat(Balloons.attemptOfPodName("oneshot-balloons-a-5d8f7c9b4-x2k9q", "ns")).isEmpty();
  }
}
