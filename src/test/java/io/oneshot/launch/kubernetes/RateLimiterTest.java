package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class RateLimiterTest {
  @Test
  void aBurstPassesThenCallsAreSpacedByTheRate() {
    AtomicLong now = new AtomicLong();
    RateLimiter r = new RateLimiter(10, 3, now::get);
    assertThat(r.reserve(1)).isZero();
    assertThat(r.reserve(1)).isZero();
    assertThat(r.reserve(1)).isZero();
    // Empty: the next token comes in 100 ms, the one after in 200 ms (they queue up).
    assertThat(r.reserve(1)).isEqualTo(100_000_000L);
    assertThat(r.reserve(1)).isEqualTo(200_000_000L);
    // After a quiet second the bucket is full again, never fuller than the burst.
    now.addAndGet(10_000_000_000L);
    assertThat(r.reserve(1)).isZero();
    assertThat(r.reserve(1)).isZero();
    assertThat(r.reserve(1)).isZero();
    assertThat(r.reserve(1)).isPositive();
  }
}
