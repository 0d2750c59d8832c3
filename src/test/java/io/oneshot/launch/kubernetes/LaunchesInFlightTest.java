package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code launchesInFlight} is the Kubernetes launcher's capacity, which the dispatcher honours
 * ({@code DispatcherTest.noMoreLaunchesAreUnderWayAtOnceThanTheLauncherTakes}).
 */
class LaunchesInFlightTest {
  private static OneshotConfig config(String settings) {
    return ConfigLoader.parse(
        """
        api: {publicUrl: "http://oneshot.oneshot.svc:8080"}
        launcher: {kind: kubernetes, kubernetes: {namespace: builds, templateDir: job-templates%s}}
        routes: [{name: scripts, template: script.yaml}]
        """
            .formatted(settings),
        "t",
        Map.of());
  }

  private static int launchesAtOnce(OneshotConfig config) {
    // No call reaches this address: the launcher calls nothing until it is started.
    try (KubernetesClient client =
        new KubernetesClientBuilder()
            .withConfig(new ConfigBuilder().withMasterUrl("http://127.0.0.1:9").build())
            .build()) {
      return KubernetesLauncher.create(config, client).launchesAtOnce();
    }
  }

  @Test
  void theLauncherTakesAsManyLaunchesAtOnceAsConfigured() {
    assertThat(launchesAtOnce(config(", launchesInFlight: 300"))).isEqualTo(300);
  }

  @Test
  void byDefaultItTakesEnoughForANineOClockBurst() {
    OneshotConfig defaults = config("");
    assertThat(defaults.launcher().kubernetes().launchesInFlight())
        .isEqualTo(ConfigLoader.DEFAULT_LAUNCHES_IN_FLIGHT)
        .isEqualTo(64);
    assertThat(launchesAtOnce(defaults)).isEqualTo(64);
    // A launch is three requests: the burst sends the first 100 launches at once, and the rate
    // carries 100 more in three seconds.
    assertThat(defaults.launcher().kubernetes().qps()).isEqualTo(100);
    assertThat(defaults.launcher().kubernetes().burst()).isEqualTo(300);
  }
}
