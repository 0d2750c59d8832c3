package io.oneshot.provisionerd;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * The warm-up the image's build runs for its class data sharing archive is a whole script build:
 * acquired, run, its lines shipped, its outcome reported, exit 0.
 */
class WarmUpTest {
  @Test
  void aWarmUpRunsOneScriptBuildToItsReportedEnd() {
    assertThat(WarmUp.run()).isZero();
  }
}
