package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.oneshot.config.ConfigException;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The routes' Job templates are read when the launcher is made, before any cluster is reached: a
 * template that cannot be used stops the dispatcher's start, and what each asks for its container
 * is known to the route mirror (the pod rules' baseline) even for a cluster that does not answer.
 */
class ClustersTemplatesTest {
  private static OneshotConfig config(String template) {
    return ConfigLoader.parse(
        """
        api: {publicUrl: "http://127.0.0.1:8080"}
        launcher: {kind: kubernetes, kubernetes: {templateDir: job-templates}}
        clusters: [{name: far, kubeconfig: /nowhere/kubeconfig}]
        routes:
          - {name: near, tags: {at: near}, template: script.yaml}
          - {name: away, tags: {at: far}, template: %s, cluster: far}
        """
            .formatted(template),
        "oneshot.yaml",
        Map.of());
  }

  @Test
  void aRoutesTemplateResourcesAreKnownBeforeItsClusterAnswers() {
    OneshotConfig c = config("script.yaml");
    try (Clusters clusters =
        new Clusters(
            c,
            cluster -> {
              throw new IllegalStateException("no cluster is reached here");
            })) {
      // job-templates/script.yaml: the provisionerd container asks for 256Mi, limited to 512Mi.
      Map<String, Map<String, String>> away = clusters.templateResources(c.route("away").get());
      assertThat(away.get("requests")).containsEntry("memory", "256Mi");
      assertThat(away.get("limits")).containsEntry("memory", "512Mi");
    }
  }

  @Test
  void aTemplateThatIsNotThereStopsTheStartWhateverItsCluster() {
    OneshotConfig c = config("missing.yaml");
    assertThatThrownBy(
            () ->
                new Clusters(
                    c,
                    cluster -> {
                      throw new IllegalStateException("no cluster is reached here");
                    }))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("missing.yaml");
  }
}
