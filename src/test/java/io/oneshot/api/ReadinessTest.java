package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.testing.Api;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.TcpProxy;
import io.oneshot.testing.TestServer;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@code /readyz} is what load balancers and rollouts go by: it must say no when this replica
 * cannot serve (its database is down or silent, or it is shutting down), while {@code /healthz}
 * keeps saying the process is alive.
 */
class ReadinessTest {
  private TestServer t;
  private TcpProxy db;

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
    if (db != null) {
      db.close();
    }
  }

  private Api anonymous() {
    return new Api(t.api.base(), null);
  }

  @Test
  void notReadyWhileTheDatabaseIsDownOrSilent() {
    db = TcpProxy.forTestDatabase();
    t = TestServer.with().databaseUrl(db.url()).launcher(new NoopLauncher()).start();
    assertThat(anonymous().get("/readyz").status()).isEqualTo(200);

    db.cut();
    await().atMost(30, TimeUnit.SECONDS).until(() -> anonymous().get("/readyz").status() == 503);
    Api.Response down = anonymous().get("/readyz");
    assertThat(down.json().path("ready").asBoolean()).isFalse();
    assertThat(down.json().path("database").asText()).isNotEqualTo("ok");
    assertThat(anonymous().get("/healthz").status()).isEqualTo(200);

    db.restore();
    await().atMost(30, TimeUnit.SECONDS).until(() -> anonymous().get("/readyz").status() == 200);

    db.freeze();
    Api.Response silent = anonymous().get("/readyz");
    assertThat(silent.status()).isEqualTo(503);
    assertThat(silent.json().path("database").asText()).isEqualTo("no answer within 2 s");
    db.restore();
  }

  @Test
  void notReadyAndRefusingWorkWhileDraining() {
    t = TestServer.with().launcher(new NoopLauncher()).start();
    assertThat(anonymous().get("/readyz").status()).isEqualTo(200);

    // Nothing is in flight but what the last answer's bookkeeping may still hold.
    assertThat(t.server.api().drain(Duration.ofSeconds(10))).isZero();
    assertThat(anonymous().get("/readyz").status()).isEqualTo(503);
    Api.Response refused = t.api.get("/api/v1/builds");
    assertThat(refused.status()).isEqualTo(503);
    assertThat(refused.json().path("error").asText()).isEqualTo("this replica is shutting down");
    assertThat(anonymous().get("/healthz").status()).isEqualTo(200);
  }
}
