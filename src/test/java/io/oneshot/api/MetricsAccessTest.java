package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.Api;
import io.oneshot.testing.PromText;
import io.oneshot.testing.TestServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code /metrics} says what every team does (per-route series): on the API's port, which an
 * Ingress may route to the world, only the admin token reads it; the port of {@code
 * api.metricsListen} serves it to its scraper, and nothing else.
 */
class MetricsAccessTest {
  private static TestServer t;

  @BeforeAll
  static void start() {
    t = TestServer.with().apiWith("metricsListen: \"127.0.0.1:0\"").start();
    t.api.submitScript("{\"team\": \"b\"}", "true");
  }

  @AfterAll
  static void stop() {
    t.close();
  }

  @Test
  void theApiPortServesMetricsToTheAdminTokenAlone() {
    Api anonymous = new Api(t.api.base(), null);
    assertThat(anonymous.get("/metrics").status()).isEqualTo(401);
    Api.Response made =
        t.api.post(
            "/api/v1/tokens",
            "{\"name\": \"viewer-b\", \"role\": \"operator\", \"routes\": [\"b\"]}");
    assertThat(made.status()).as(made.text()).isEqualTo(201);
    Api team = new Api(t.api.base(), made.json().path("token").asText());
    Api.Response refused = team.get("/metrics");
    assertThat(refused.status()).isEqualTo(401);
    assertThat(refused.text()).doesNotContain("oneshot_builds");
    Api.Response admin = t.api.get("/metrics");
    assertThat(admin.status()).isEqualTo(200);
    assertThat(PromText.parse(admin.text()).value("oneshot_route_max_concurrent", "route", "b"))
        .isNotNull();
  }

  @Test
  void theMetricsPortServesMetricsAndNothingElse() {
    assertThat(t.server.metricsPort()).isPositive().isNotEqualTo(t.server.port());
    Api scraper = new Api("http://127.0.0.1:" + t.server.metricsPort(), null);
    Api.Response r = scraper.get("/metrics");
    assertThat(r.status()).isEqualTo(200);
    assertThat(PromText.parse(r.text()).value("oneshot_route_max_concurrent", "route", "b"))
        .isNotNull();
    assertThat(scraper.get("/api/v1/builds").status()).isEqualTo(404);
    assertThat(
            new Api("http://127.0.0.1:" + t.server.metricsPort(), TestServer.ADMIN_TOKEN)
                .get("/api/v1/builds")
                .status())
        .isEqualTo(404);
  }
}
