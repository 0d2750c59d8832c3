package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.KubernetesResource;
import io.fabric8.kubernetes.api.model.WatchEvent;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The informers decode what the launcher reads of a Job or Pod (metadata, status, a pod's node) and
 * skip the rest; nothing else the launcher reads with the same client loses anything by it.
 */
class WatchedKindsTest {
  /** A Job's ADDED event as an API server sends it, managedFields and pod template included. */
  private static final String JOB_EVENT =
      """
      {"type": "ADDED", "object": {"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "oneshot-7-1", "namespace": "builds", "uid": "u-1",
          "resourceVersion": "42", "labels": {"oneshot.io/build": "7", "oneshot.io/attempt": "1"},
          "annotations": {"oneshot.io/route": "default"},
          "managedFields": [{"manager": "oneshot", "operation": "Update", "apiVersion": "batch/v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {}}}}}]},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"a": "b"}},
          "spec": {"restartPolicy": "Never", "containers": [{"name": "provisionerd",
            "image": "oneshot:1", "env": [{"name": "ONESHOT_URL", "value": "http://x"}]}]}}},
        "status": {"active": 1, "failed": 0, "ready": 1,
          "conditions": [{"type": "Complete", "status": "False"}]}}}
      """;

  private static final String POD_EVENT =
      """
      {"type": "MODIFIED", "object": {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "oneshot-7-1-abcde", "namespace": "builds", "uid": "p-1",
          "labels": {"oneshot.io/build": "7"},
          "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]},
        "spec": {"nodeName": "node-3", "restartPolicy": "Never",
          "containers": [{"name": "provisionerd", "image": "oneshot:1", "args": ["run"]}],
          "volumes": [{"name": "tmp", "emptyDir": {}}], "tolerations": [{"operator": "Exists"}]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "provisionerd",
          "ready": true, "restartCount": 0, "image": "oneshot:1", "imageID": "",
          "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]}}}
      """;

  private static KubernetesSerialization watching() {
    KubernetesSerialization s = new KubernetesSerialization();
    WatchedKinds.register(s);
    return s;
  }

  @Test
  void aJobEventKeepsItsMetadataAndStatusAndSkipsItsSpecAndManagedFields() {
    KubernetesSerialization s = watching();
    WatchEvent event = s.unmarshal(JOB_EVENT, WatchEvent.class);

    assertThat(event.getObject()).isInstanceOf(WatchedKinds.Job.class);
    Job job = (Job) event.getObject();
    assertThat(job.getMetadata().getName()).isEqualTo("oneshot-7-1");
    assertThat(job.getMetadata().getUid()).isEqualTo("u-1");
    assertThat(job.getMetadata().getResourceVersion()).isEqualTo("42");
    assertThat(job.getMetadata().getLabels()).containsEntry("oneshot.io/attempt", "1");
    assertThat(job.getMetadata().getAnnotations()).containsEntry("oneshot.io/route", "default");
    assertThat(job.getMetadata().getManagedFields()).isEmpty();
    assertThat(job.getSpec()).isNull();
    assertThat(job.getStatus().getActive()).isEqualTo(1);
    assertThat(job.getStatus().getConditions()).hasSize(1);
    assertThat(job.getStatus().getConditions().get(0).getType()).isEqualTo("Complete");
    // What the launcher reads off it reads the same as off the whole Job.
    Job whole =
        new KubernetesSerialization().unmarshal(JOB_EVENT, WatchEvent.class).getObject()
                instanceof Job j
            ? j
            : null;
    assertThat(whole).isNotNull();
    assertThat(whole.getSpec().getTemplate().getSpec().getContainers()).hasSize(1);
    assertThat(JobStatus.finished(job)).isEqualTo(JobStatus.finished(whole));
    // The cached object still serializes, for a log line or a debugger.
    assertThat(s.asJson(job)).contains("\"oneshot-7-1\"").doesNotContain("managedFields");
  }

  @Test
  void aPodEventKeepsItsNodeAndStatusAndSkipsTheRestOfItsSpec() {
    KubernetesSerialization s = watching();
    WatchEvent event = s.unmarshal(POD_EVENT, WatchEvent.class);

    assertThat(event.getObject()).isInstanceOf(WatchedKinds.Pod.class);
    var pod = (io.fabric8.kubernetes.api.model.Pod) event.getObject();
    assertThat(pod.getMetadata().getName()).isEqualTo("oneshot-7-1-abcde");
    assertThat(pod.getMetadata().getManagedFields()).isEmpty();
    assertThat(pod.getSpec().getNodeName()).isEqualTo("node-3");
    assertThat(pod.getSpec().getContainers()).isEmpty();
    assertThat(pod.getSpec().getVolumes()).isEmpty();
    assertThat(pod.getStatus().getPhase()).isEqualTo("Running");
    assertThat(JobStatus.exited(pod)).isTrue();
    assertThat(
            pod.getStatus().getContainerStatuses().get(0).getState().getTerminated().getExitCode())
        .isEqualTo(3);
  }

  @Test
  void typedReadsWithTheSameSerializationStillDecodeTheWholeJob() {
    KubernetesSerialization s = watching();
    String manifest = s.asJson(s.unmarshal(JOB_EVENT, WatchEvent.class).getObject());
    String whole =
        JOB_EVENT.substring(JOB_EVENT.indexOf("{\"apiVersion\""), JOB_EVENT.lastIndexOf('}'));

    assertThat(s.unmarshal(whole, Job.class).getSpec().getTemplate().getSpec().getContainers())
        .as("a Job read as a Job (the create's answer, a GET)")
        .hasSize(1);
    assertThat(s.unmarshal(whole, KubernetesResource.class))
        .as("a Job read by its kind decodes as the watch does")
        .isInstanceOf(WatchedKinds.Job.class);
    assertThat(manifest).doesNotContain("\"template\"");
  }

  @Test
  void aSecondLauncherOnTheSameClientStillReadsItsTemplatesWhole() {
    OneshotConfig config =
        ConfigLoader.parse(
            """
            api: {publicUrl: "http://oneshot.oneshot.svc:8080"}
            launcher: {kind: kubernetes, kubernetes: {namespace: builds, templateDir: "%s"}}
            routes: [{name: default, template: script.yaml}]
            """
                .formatted(Path.of("job-templates").toAbsolutePath()),
            "t",
            Map.of());
    try (KubernetesClient client =
        new KubernetesClientBuilder()
            .withConfig(new ConfigBuilder().withMasterUrl("https://127.0.0.1:1").build())
            .build()) {
      KubernetesLauncher.create(config, client);
      // The first launcher's watch decodes Jobs read by their kind without their specs on this
      // client: the second's templates must not be read that way.
      KubernetesLauncher second = KubernetesLauncher.create(config, client);

      assertThat(second).isNotNull();
      assertThat(
              client
                  .getKubernetesSerialization()
                  .unmarshal(
                      "{\"apiVersion\": \"batch/v1\", \"kind\": \"Job\"}",
                      KubernetesResource.class))
          .isInstanceOf(WatchedKinds.Job.class);
    }
  }
}
