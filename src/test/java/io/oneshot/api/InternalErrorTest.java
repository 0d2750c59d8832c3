package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.Api;
import io.vertx.core.Vertx;
import io.vertx.ext.web.Router;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** A handler that fails inside answers 500 with a reference to the log, never its own text. */
class InternalErrorTest {
  private final Vertx vertx = Vertx.vertx();

  @AfterEach
  void close() {
    vertx.close().toCompletionStage().toCompletableFuture().join();
  }

  @Test
  void aFailureInsideAnswers500WithoutItsText() {
    Router router = Router.router(vertx);
    router
        .get("/boom")
        .handler(
            ctx -> {
              throw new IllegalStateException("relation oneshot.secret_table: password=hunter2");
            });
    router.route().failureHandler(Http.failureHandler(1024));
    int port =
        vertx
            .createHttpServer()
            .requestHandler(router)
            .listen(0, "127.0.0.1")
            .toCompletionStage()
            .toCompletableFuture()
            .join()
            .actualPort();
    Api.Response r = new Api("http://127.0.0.1:" + port, null).get("/boom");
    assertThat(r.status()).isEqualTo(500);
    assertThat(r.json().path("error").asText()).isEqualTo("internal error");
    assertThat(r.json().path("detail").asText())
        .matches("the dispatcher's log says more under error [0-9a-f]+");
    assertThat(r.text()).doesNotContain("secret_table", "hunter2", "IllegalState");
  }
}
