package io.oneshot.e2e;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.testing.Api;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TerraformOnPath;
import io.oneshot.testing.TestServer;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Sensitive values through real provisionerd runs: masked in the stored log, in a followed log and
 * on provisionerd's stdout; never answered by the API; sealed in the database (a search of every
 * row finds nothing); and still handed to the build, and to its rerun.
 */
class SensitiveValuesTest {
  private static final String SECRET = "hunter2-c0rrect-h0rse";
  private static final String KEYS =
      "encryption:\n  keys: [{id: k1, secret: \"0123456789abcdef0123456789abcdef\"}]\n";

  private TestServer t;

  @AfterEach
  void stop() {
    if (t != null) {
      t.close();
    }
  }

  private String awaitEnd(long id) {
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(() -> List.of("succeeded", "failed", "canceled").contains(status(id)));
    return status(id);
  }

  private long submit(String body) {
    Api.Response r = t.api.post("/api/v1/builds", body);
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    return r.json().path("id").asLong();
  }

  private static String script(String command) {
    return "{\"input\": {\"provisioner\": \"script\", \"command\": [\"sh\", \"-c\", "
        + Json.write(command)
        + "], \"env\": {\"SECRET\": \""
        + SECRET
        + "\", \"PLAIN\": \"visible\"}, \"sensitive\": [\"SECRET\"]}}";
  }

  @Test
  void aSensitiveEnvValueIsMaskedEverywhereAndSealedAtRest() {
    t = TestServer.with().routes("routes: [{name: default}]\n" + KEYS).start();
    long id =
        submit(
            script(
                "echo \"the secret is $SECRET and $PLAIN\"; echo \"$SECRET\" >&2;"
                    // The value split in two, so that the command itself does not hold it.
                    + " test \"$SECRET\" = '"
                    + SECRET.substring(0, 5)
                    + "''"
                    + SECRET.substring(5)
                    + "' && echo handed-over; echo \"failing with $SECRET\" >&2; exit 3"));
    assertThat(awaitEnd(id)).isEqualTo("failed");

    List<String> out = Sql.logLines(id, "stdout");
    assertThat(out).contains("the secret is *** and visible", "handed-over");
    assertThat(Sql.logLines(id, "stderr")).contains("***", "failing with ***");
    String followed = t.api.get("/api/v1/builds/" + id + "/logs?follow=true").text();
    assertThat(followed).contains("the secret is *** and visible").doesNotContain(SECRET);

    JsonNode input = t.api.get("/api/v1/builds/" + id + "/input").json();
    assertThat(input.path("env").path("SECRET").asText()).isEqualTo("***");
    assertThat(input.path("env").path("PLAIN").asText()).isEqualTo("visible");
    assertThat(t.api.get("/api/v1/builds/" + id).text()).doesNotContain(SECRET);
    assertThat(Sql.dumpSearch(SECRET)).isEmpty();
    assertThat((String) Sql.value("SELECT sealed FROM oneshot.builds WHERE id = ?", id))
        .startsWith("oneshot-sealed:v2:k1:");

    // A rerun gets the value too: it is sealed again for the new build.
    long rerun = t.api.post("/api/v1/builds/" + id + "/rerun", "{}").json().path("id").asLong();
    assertThat(awaitEnd(rerun)).isEqualTo("failed");
    assertThat(Sql.logLines(rerun, "stdout")).contains("handed-over");
    assertThat(Sql.dumpSearch(SECRET)).isEmpty();
  }

  @Test
  void aSensitiveTerraformVariableAndStateNeverReachTheDatabaseInPlainText() {
    TerraformOnPath.assume();
    t = TestServer.with().routes("routes: [{name: tf}]\n" + KEYS).start();
    String module =
        """
        variable "password" { type = string }
        resource "terraform_data" "pw" {
          input = var.password
          provisioner "local-exec" { command = "echo applying with ${var.password}" }
        }
        output "pw" {
          value     = terraform_data.pw.output
          sensitive = true
        }
        output "length" { value = length(var.password) }
        """;
    long id =
        submit(
            "{\"workspace\": \"ws\", \"input\": {\"provisioner\": \"terraform\", \"files\":"
                + " {\"main.tf\": "
                + Json.write(module)
                + "}, \"variables\": {\"password\": \""
                + SECRET
                + "\"}, \"sensitive\": [\"password\"]}}");
    assertThat(awaitEnd(id)).isEqualTo("succeeded");

    JsonNode build = t.api.get("/api/v1/builds/" + id).json();
    assertThat(build.path("outputs").path("length").path("value").asInt())
        .isEqualTo(SECRET.length());
    assertThat(build.path("outputs").path("pw").path("sensitive").asBoolean()).isTrue();
    assertThat(build.toString()).doesNotContain(SECRET);
    assertThat(t.api.get("/api/v1/builds/" + id + "/logs").text()).doesNotContain(SECRET);
    // The state holds the value (terraform keeps it there): sealed in the database, and read back
    // whole through the API by the admin.
    assertThat(Sql.dumpSearch(SECRET)).isEmpty();
    assertThat(
            (String) Sql.value("SELECT state FROM oneshot.workspace_states WHERE workspace = 'ws'"))
        .startsWith("oneshot-sealed:v2:k1:");
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=ws").text()).contains(SECRET);
  }

  @Test
  void withoutEncryptionKeysSensitiveValuesAreRefusedAndNothingIsWritten() {
    t = TestServer.with().routes("routes: [{name: default}]").start();
    Api.Response r = t.api.post("/api/v1/builds", script("true"));
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.json().path("field").asText()).isEqualTo("input.sensitive");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
  }
}
