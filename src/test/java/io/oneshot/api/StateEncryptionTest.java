package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.oneshot.launch.Attempt;
import io.oneshot.testing.Api;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Workspace state at rest: sealed with the first of {@code encryption.keys}, read back through a
 * key rotation (a new key first, the old one kept), and refused clearly once a key that sealed a
 * version is gone.
 */
class StateEncryptionTest {
  private static final String K1 = "{id: k1, secret: \"0123456789abcdef0123456789abcdef\"}";
  private static final String K2 = "{id: k2, secret: \"fedcba9876543210fedcba9876543210\"}";

  private TestServer t;
  private final RecordingLauncher launcher = new RecordingLauncher();

  @AfterEach
  void stop() {
    if (t != null) {
      t.close();
    }
  }

  private void start(String keys, boolean keepQueue) {
    if (t != null) {
      t.close();
    }
    TestServer.Builder b =
        TestServer.with()
            .routes("routes: [{name: tf}]\nencryption: {keys: [" + keys + "]}")
            .launcher(launcher);
    if (keepQueue) {
      b.keepQueue();
    }
    t = b.start();
  }

  /**
   * A build on workspace {@code ws} that stores {@code marker} in its state; its acquire's state.
   */
  private String build(String ws, int serial, String marker) {
    long id = t.api.submitTerraform(ws, "");
    Attempt a = launcher.awaitLaunched(id, 1);
    String state =
        "{\"version\": 4, \"serial\": "
            + serial
            + ", \"lineage\": \"L\", \"outputs\": {\"m\": \""
            + marker
            + "\"}}";
    String handed =
        new Api(t.api.base(), null)
            .acquireAndComplete(a.token().value(), state)
            .path("state")
            .asText();
    return handed;
  }

  private static String stored(int version) {
    return (String)
        Sql.value(
            "SELECT state FROM oneshot.workspace_states WHERE workspace = 'ws' AND version = ?",
            version);
  }

  @Test
  void stateIsSealedAtRestAndOldVersionsStayReadableAfterARotation() {
    start(K1, false);
    build("ws", 1, "first-marker");
    assertThat(stored(1)).startsWith("oneshot-sealed:v2:k1:").doesNotContain("first-marker");
    assertThat(Sql.dumpSearch("first-marker")).isEmpty();
    // The size shown is the state's, not the sealed text's.
    assertThat(
            t.api
                .get("/api/v1/workspaces/states?workspace=ws")
                .json()
                .path("versions")
                .get(0)
                .path("bytes")
                .asInt())
        .isEqualTo(
            ("{\"version\": 4, \"serial\": 1, \"lineage\": \"L\", \"outputs\": {\"m\":"
                    + " \"first-marker\"}}")
                .length());

    // Rotation: k2 seals from now on, k1 still opens what it sealed.
    start(K2 + ", " + K1, true);
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=ws&version=1").text())
        .contains("first-marker");
    // The next build of the workspace is handed the old state, decrypted.
    assertThat(build("ws", 2, "second-marker")).contains("first-marker");
    assertThat(stored(2)).startsWith("oneshot-sealed:v2:k2:");

    // Without k1, version 1 cannot be read, and the answer says which key it needs.
    start(K2, true);
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=ws&version=2").text())
        .contains("second-marker");
    Api.Response lost = t.api.get("/api/v1/workspaces/state?workspace=ws&version=1");
    assertThat(lost.status()).isEqualTo(500);
    assertThat(lost.json().path("error").asText()).contains("key k1");
  }

  /**
   * A key whose secret changed under the same id (its Secret made again) stops the start, saying
   * so, before anything sealed with the old secret is needed; the key it had starts again.
   */
  @Test
  void aKeyWhoseSecretChangedStopsTheStartSayingSo() {
    start(K1, false);
    build("ws", 1, "first-marker");
    t.close();
    t = null;
    String changed = "{id: k1, secret: \"another-secret-of-32-characters!!\"}";
    assertThatThrownBy(() -> start(changed, true))
        .isInstanceOf(io.oneshot.config.ConfigException.class)
        .hasMessageStartingWith("encryption key k1 is not the key k1 this database was sealed with")
        .hasMessageContaining("Argo CD");
    // A new key under a new id, k1 kept after it: starts, and the old state opens.
    start(K2 + ", " + K1, true);
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=ws&version=1").text())
        .contains("first-marker");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.key_checks")).isEqualTo(2);
  }

  @Test
  void aSealedStateMovedToAnotherVersionOrWorkspaceDoesNotOpen() {
    start(K1, false);
    build("ws", 1, "first-marker");
    build("ws", 2, "second-marker");
    build("other", 1, "other-marker");
    // Someone with the database copies version 1's state over version 2, and over another
    // workspace's: neither opens, and the next build of the workspace is not handed it.
    Sql.exec(
        "UPDATE oneshot.workspace_states SET state = (SELECT state FROM oneshot.workspace_states"
            + " WHERE workspace = 'ws' AND version = 1) WHERE workspace = 'ws' AND version = 2");
    Sql.exec(
        "UPDATE oneshot.workspace_states SET state = (SELECT state FROM oneshot.workspace_states"
            + " WHERE workspace = 'ws' AND version = 1) WHERE workspace = 'other'");
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=ws&version=1").text())
        .contains("first-marker");
    for (String q : List.of("workspace=ws&version=2", "workspace=other&version=1")) {
      Api.Response moved = t.api.get("/api/v1/workspaces/state?" + q);
      assertThat(moved.status()).as(q).isEqualTo(500);
      assertThat(moved.json().path("error").asText()).as(q).contains("moved");
      assertThat(moved.text()).doesNotContain("first-marker");
    }
    long id = t.api.submitTerraform("ws", "");
    Attempt a = launcher.awaitLaunched(id, 1);
    Api.Response acquired =
        new Api(t.api.base(), null).post("/api/v1/runner/acquire", "{}", a.token().value());
    assertThat(acquired.status()).isEqualTo(410);
    assertThat(acquired.text()).doesNotContain("first-marker");
  }

  @Test
  void stateStoredBeforeKeysWereSetIsStillReadAndTheNextVersionIsSealed() {
    t = TestServer.with().routes("routes: [{name: tf}]").launcher(launcher).start();
    build("ws", 1, "plain-marker");
    assertThat(stored(1)).contains("plain-marker");
    start(K1, true);
    assertThat(build("ws", 2, "sealed-marker")).contains("plain-marker");
    assertThat(stored(2)).startsWith("oneshot-sealed:v2:k1:");
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=ws").text()).contains("sealed-marker");
  }

  @Test
  void aBuildWhoseSealedValuesCannotBeOpenedFailsAtAcquireSayingWhichKeyIsMissing() {
    start(K1, false);
    Api.Response r =
        t.api.post(
            "/api/v1/builds",
            "{\"input\": {\"provisioner\": \"script\", \"command\": [\"true\"], \"env\":"
                + " {\"KEY\": \"v4lue\"}, \"sensitive\": [\"KEY\"]}}");
    long id = r.json().path("id").asLong();
    Attempt a = launcher.awaitLaunched(id, 1);
    // The dispatcher comes back without the key that sealed the build's values.
    start(K2, true);
    Api.Response acquired =
        new Api(t.api.base(), null).post("/api/v1/runner/acquire", "{}", a.token().value());
    assertThat(acquired.status()).isEqualTo(410);
    assertThat(TestServer.status(id)).isEqualTo("failed");
    assertThat(t.api.get("/api/v1/builds/" + id).json().path("error").asText())
        .contains("cannot decrypt")
        .contains("key k1");
  }
}
