package io.oneshot.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class BackoffTest {
  private final Backoff policy = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(1));

  @Test
  void theDelayDoublesFromInitialUpToMax() {
    assertThat(policy.base(0)).isEqualTo(Duration.ofMillis(100));
    assertThat(policy.base(1)).isEqualTo(Duration.ofMillis(200));
    assertThat(policy.base(3)).isEqualTo(Duration.ofMillis(800));
    assertThat(policy.base(4)).isEqualTo(Duration.ofSeconds(1));
    assertThat(policy.base(1_000_000)).isEqualTo(Duration.ofSeconds(1));
  }

  @Test
  void theRandomPartIsAtMostHalfTheDelay() {
    for (int retry = 0; retry < 8; retry++) {
      Duration base = policy.base(retry);
      for (int i = 0; i < 200; i++) {
        assertThat(policy.delay(retry)).isBetween(base, base.plus(base.dividedBy(2)));
      }
    }
  }

  @Test
  void aSequenceCountsItsRetriesAndStartsOverWhenReset() {
    Backoff.Sequence s = policy.sequence();
    assertThat(s.upcoming()).isEqualTo(Duration.ofMillis(100));
    assertThat(s.next()).isBetween(Duration.ofMillis(100), Duration.ofMillis(150));
    assertThat(s.upcoming()).isEqualTo(Duration.ofMillis(200));
    s.next();
    s.next();
    assertThat(s.upcoming()).isEqualTo(Duration.ofMillis(800));
    s.reset();
    assertThat(s.upcoming()).isEqualTo(Duration.ofMillis(100));
  }

  @Test
  void aPolicyMustWaitAndNeverShrink() {
    assertThatThrownBy(() -> new Backoff(Duration.ZERO, Duration.ofSeconds(1)))
        .hasMessageContaining("initial must be positive");
    assertThatThrownBy(() -> new Backoff(Duration.ofSeconds(2), Duration.ofSeconds(1)))
        .hasMessageContaining("below initial (2s)");
  }
}
