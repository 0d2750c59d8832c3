package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.lang.ref.WeakReference;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * A server's metrics live as long as the server: once nothing refers to them, they and all their
 * gauges' callbacks reach (a dispatcher, its informers' caches) can be collected, while every
 * instance still exports the JVM's own metrics.
 */
class MetricsLifetimeTest {

  @Test
  void metricsNobodyRefersToAreCollectedWithWhatTheirGaugesRead() {
    WeakReference<Object> watched = metricsWatchingSomething();
    await("the watched object collected")
        .atMost(Duration.ofSeconds(20))
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              System.gc();
              return watched.get() == null;
            });
  }

  @Test
  void everyInstanceExportsTheJvmsOwnMetrics() {
    for (int i = 0; i < 2; i++) {
      assertThat(new Metrics().scrape())
          .contains("jvm_memory_used_bytes{area=\"heap\"}")
          .contains("process_cpu_seconds_total");
    }
  }

  /** Metrics whose gauge reads an object only they refer to; a reference that lets it go. */
  private static WeakReference<Object> metricsWatchingSomething() {
    Object server = new Object();
    Metrics m = new Metrics();
    m.watchApi(() -> server.hashCode() & 1);
    assertThat(m.scrape()).contains("jvm_memory_used_bytes");
    return new WeakReference<>(server);
  }
}
