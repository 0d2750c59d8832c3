package io.oneshot.launch.kubernetes;

import java.util.function.LongSupplier;

/**
 * A token bucket that keeps this dispatcher's calls to the Kubernetes API server under {@code qps}
 * a second, with bursts of up to {@code burst}: what client-go calls its client-side rate limit.
 * Callers that find the bucket empty wait their turn, in order.
 */
final class RateLimiter {
  private final double perNano;
  private final int burst;
  private final LongSupplier nanoClock;
  private double tokens;
  private long last;

  RateLimiter(double qps, int burst) {
    this(qps, burst, System::nanoTime);
  }

  RateLimiter(double qps, int burst, LongSupplier nanoClock) {
    if (qps <= 0 || burst < 1) {
      throw new IllegalArgumentException("qps must be > 0 and burst >= 1");
    }
    this.perNano = qps / 1e9;
    this.burst = burst;
    this.nanoClock = nanoClock;
    this.tokens = burst;
    this.last = nanoClock.getAsLong();
  }

  /**
   * Takes {@code n} tokens at once (more than one for requests that must follow each other
   * closely); returns how long (ns) the caller must wait before using them.
   */
  synchronized long reserve(int n) {
    long now = nanoClock.getAsLong();
    tokens = Math.min(burst, tokens + (now - last) * perNano);
    last = now;
    tokens -= n;
    return tokens >= 0 ? 0 : (long) Math.ceil(-tokens / perNano);
  }

  /** Waits for {@code n} tokens, taken together. */
  void acquire(int n) throws InterruptedException {
    long wait = reserve(n);
    if (wait > 0) {
      Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
    }
  }
}
