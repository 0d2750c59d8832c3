package io.oneshot.bench;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.k8s.FaultyDispatcher;
import io.oneshot.testing.k8s.MockCluster;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The launch scenario's sides against the mock API. */
class LaunchBenchTest {
  /**
   * The plain client against the mock API is made as a program outside the tests makes one: an
   * answer slower than the tests' client would wait for (3 s) is waited for, within fabric8's own
   * request timeout (10 s), instead of failing the run and the scenario with it.
   */
  @Test
  void thePlainClientWaitsForASlowAnswerAsFabric8sDefaultsDo() throws Exception {
    MockCluster c = Setups.cluster();
    Duration held = Duration.ofMillis(3_500);
    c.dispatcher.add(FaultyDispatcher.doneButLost("POST", "/jobs$", held));
    try (LaunchBench.Api api = LaunchBench.mock(c)) {
      LaunchBench.Run run = LaunchBench.plain(api, 4, 2, LaunchBench.Recipe.TWO);

      assertThat(run.n()).isEqualTo(4);
      assertThat(run.seconds()).as("the held answer was waited for").isGreaterThan(3.5);
      assertThat(c.admin.batch().v1().jobs().inNamespace(Setups.ROUTE).list().getItems())
          .hasSize(4);
    }
  }
}
