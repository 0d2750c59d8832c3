package io.oneshot.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.oneshot.api.Json;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** The pod options of submit and builds rerun, as the input.pod they send. */
class PodOptionsTest {
  private static String pod(String... args) {
    PodOptions o = new PodOptions();
    new CommandLine(o).parseArgs(args);
    var p = o.pod();
    return p == null ? null : Json.write(p);
  }

  @Test
  void eachOptionIsItsSetting() {
    assertThat(pod()).isNull();
    assertThat(Json.tree(pod("--memory", "1Gi", "--cpu", "500m")))
        .isEqualTo(
            Json.tree(
                "{\"resources\": {\"requests\": {\"cpu\": \"500m\", \"memory\": \"1Gi\"},"
                    + " \"limits\": {\"memory\": \"1Gi\"}}}"));
    assertThat(Json.tree(pod("--memory", "2Gi", "--memory-request", "1Gi", "--cpu-limit", "2")))
        .isEqualTo(
            Json.tree(
                "{\"resources\": {\"requests\": {\"memory\": \"1Gi\"}, \"limits\": {\"cpu\":"
                    + " \"2\", \"memory\": \"2Gi\"}}}"));
    assertThat(
            Json.tree(
                pod(
                    "--image",
                    "ghcr.io/acme/tools:1",
                    "--node-selector",
                    "pool=gpu",
                    "--toleration",
                    "nvidia.com/gpu:NoSchedule",
                    "--toleration",
                    "spot=yes:NoExecute",
                    "--label",
                    "cost-center=4711",
                    "--annotation",
                    "example.com/note=hi there",
                    "--service-account",
                    "trainer")))
        .isEqualTo(
            Json.tree(
                """
                {"image": "ghcr.io/acme/tools:1", "nodeSelector": {"pool": "gpu"},
                 "tolerations": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
                                 {"effect": "NoExecute", "key": "spot", "operator": "Equal", "value": "yes"}],
                 "labels": {"cost-center": "4711"}, "annotations": {"example.com/note": "hi there"},
                 "serviceAccount": "trainer"}
                """));
  }

  @Test
  void aQuantityOrATolerationThatIsNotOneIsAUsageError() {
    assertThatThrownBy(() -> pod("--memory", "lots"))
        .isInstanceOf(CliException.class)
        .hasMessage("--memory: lots is not a quantity like 500m, 2, 512Mi or 4Gi");
    assertThatThrownBy(() -> pod("--toleration", "gpu:Sometimes"))
        .isInstanceOf(CliException.class)
        .hasMessageContaining("the effect after ':' is NoSchedule, PreferNoSchedule or NoExecute");
    assertThatThrownBy(() -> pod("--toleration", "=x"))
        .isInstanceOf(CliException.class)
        .hasMessageContaining("a toleration names a taint's key");
  }
}
