package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.TextNode;
import java.util.List;

/**
 * The request readers fuzzed with Jazzer: whatever bytes a client sends as a body, a path and a
 * query, or a terraform state, each is read or refused with a 4xx that names the field, and nothing
 * else escapes (no exception a handler would turn into a 500). {@code scripts/test} runs the corpus
 * and what earlier runs found ({@code RequestReaderFuzzTestInputs}); with {@code JAZZER_FUZZ=1}
 * each test fuzzes for its {@code maxDuration} ({@code .ci/run} does, for one).
 */
class RequestReaderFuzzTest {
  private static final List<String> TYPES =
      List.of(
          "application/json",
          "application/json; charset=utf-8",
          "Application/JSON;charset=\"UTF-8\"",
          "text/plain",
          "application/x-www-form-urlencoded",
          "");

  private static void refusedClearly(ApiError e) {
    assertThat(e.status()).isBetween(400, 499);
    assertThat(e.field()).isNotNull();
    assertThat(e.getMessage()).startsWith(e.field() + ":");
  }

  @FuzzTest(maxDuration = "20s")
  void aBodyIsReadOrRefusedNamingTheField(FuzzedDataProvider data) {
    String type = data.consumeBoolean() ? data.pickValue(TYPES) : data.consumeString(40);
    byte[] body = data.consumeRemainingAsBytes();
    try {
      JsonNode n = Http.readObject(body, type, path -> false);
      assertThat(n.isObject()).isTrue();
      // What is read is what was sent: written back and read again, the same object.
      assertThat(
              Http.readObject(
                  Json.write(n).getBytes(java.nio.charset.StandardCharsets.UTF_8),
                  "application/json",
                  path -> false))
          .isEqualTo(n);
    } catch (ApiError e) {
      refusedClearly(e);
    }
  }

  @FuzzTest(maxDuration = "10s")
  void aPathAndQueryAreCheckedOrRefusedNamingThePart(FuzzedDataProvider data) {
    String path = data.consumeString(200);
    String query = data.consumeRemainingAsString();
    try {
      Http.checkPathAndQuery(path, query);
    } catch (ApiError e) {
      refusedClearly(e);
    }
  }

  @FuzzTest(maxDuration = "10s")
  void aTerraformStateIsReadOrRefused(FuzzedDataProvider data) {
    String state = data.consumeRemainingAsString();
    try {
      var upload = WorkspaceStateApi.upload(new TextNode(state), "state", 1 << 20);
      assertThat(upload.serial()).isNotNull().isNotNegative();
    } catch (ApiError e) {
      refusedClearly(e);
    }
  }
}
