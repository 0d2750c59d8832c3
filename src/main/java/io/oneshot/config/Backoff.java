package io.oneshot.config;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How every loop that retries waits: {@code initial}, doubling with each failure up to {@code max},
 * plus a random part of up to half the delay, so that many retriers do not come back in step. The
 * one retry policy of oneshot: the dispatcher's launches, its database connections (the start and
 * the listener), and provisionerd's calls to the API all use it.
 *
 * <p>In the configuration: {@code {initial: 500ms, max: 30s}}.
 */
public record Backoff(Duration initial, Duration max) {
  /** provisionerd's calls to the API (their budget is the route's lease). */
  public static final Backoff RUNNER = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(5));

  public Backoff {
    if (initial.isNegative() || initial.isZero()) {
      throw new IllegalArgumentException("initial must be positive, got " + initial);
    }
    if (max.compareTo(initial) < 0) {
      throw new IllegalArgumentException(
          "max (" + Units.format(max) + ") is below initial (" + Units.format(initial) + ")");
    }
  }

  /**
   * The delay before retry {@code retry} without its random part: {@code initial} for the first
   * (0), twice that for the next, and so on up to {@code max}.
   */
  public Duration base(int retry) {
    long ms = initial.toMillis();
    for (int i = 0; i < retry && ms < max.toMillis(); i++) {
      ms *= 2;
    }
    return Duration.ofMillis(Math.min(ms, max.toMillis()));
  }

  /** The delay before retry {@code retry}: {@link #base} plus up to half of it at random. */
  public Duration delay(int retry) {
    long base = base(retry).toMillis();
    return Duration.ofMillis(base + ThreadLocalRandom.current().nextLong(base / 2 + 1));
  }

  /**
   * The retries of one loop: {@link #next} gives the delay before each retry, {@link #reset} starts
   * over after a success. Not thread-safe: one loop, one sequence.
   */
  public Sequence sequence() {
    return new Sequence(this);
  }

  /** A loop's place in a {@link Backoff}. */
  public static final class Sequence {
    private final Backoff policy;
    private int retries;

    private Sequence(Backoff policy) {
      this.policy = policy;
    }

    /** The delay before the next retry, which it counts. */
    public Duration next() {
      return policy.delay(retries++);
    }

    /** The delay {@link #next} will base its answer on, without counting a retry. */
    public Duration upcoming() {
      return policy.base(retries);
    }

    public void reset() {
      retries = 0;
    }
  }
}
