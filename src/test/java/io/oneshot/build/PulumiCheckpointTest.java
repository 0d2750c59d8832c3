package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** What PulumiCheckpoint says of text that is not a checkpoint, without throwing. */
class PulumiCheckpointTest {
  @Test
  void textThatIsNotJsonIsAProblemNotAnError() {
    // A checkpoint file read while it is written, or garbage: a reason, so that it is not kept.
    assertThat(PulumiCheckpoint.problemOf("{\"version\": 3, \"checkpoint\": {\"sta"))
        .isEqualTo("not a JSON object");
    assertThat(PulumiCheckpoint.parse("garbage")).isNull();
    assertThat(PulumiCheckpoint.problemOf("[]")).isEqualTo("not a JSON object");
    assertThat(PulumiCheckpoint.problemOf("{\"version\": 3, \"checkpoint\": {\"stack\": \"s\"}}"))
        .isNull();
  }
}
