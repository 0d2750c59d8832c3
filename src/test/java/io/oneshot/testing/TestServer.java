package io.oneshot.testing;

import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.Launcher;
import io.oneshot.server.OneshotServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * A whole oneshot (API, dispatcher, rescuer, local launcher) on the test database, with short
 * intervals, an empty queue and a run directory of its own.
 */
public final class TestServer implements AutoCloseable {
  public static final String ADMIN_TOKEN = "test-admin-token-0123456789";

  /** Three routes, as in the e2e scenarios: a (limit 4), b (limit 3), c (limit 2). */
  public static final String THREE_ROUTES =
      """
      routes:
        - {name: a, tags: {team: a}, maxConcurrent: 4}
        - {name: b, tags: {team: b}, maxConcurrent: 3}
        - {name: c, tags: {team: c}, maxConcurrent: 2}
      """;

  public final OneshotServer server;
  public final OneshotConfig config;
  public final Api api;
  public final Path runDir;

  private TestServer(OneshotServer server, OneshotConfig config, Path runDir) {
    this.server = server;
    this.config = config;
    this.runDir = runDir;
    this.api = new Api("http://127.0.0.1:" + server.port(), ADMIN_TOKEN);
  }

  /** The YAML every test server starts from; {@code extra} adds or replaces top-level keys. */
  public static String yaml(String dispatch, String routes, Path runDir) {
    return """
        database: {url: "%s", poolSize: 8}
        api: {listen: "127.0.0.1:0", adminToken: "%s"}
        dispatch: {%s}
        launcher: {kind: local, local: {runDir: "%s"}}
        %s
        """
        .formatted(TestDatabase.url(), ADMIN_TOKEN, dispatch, runDir, routes);
  }

  public static OneshotConfig config(String dispatch, String routes, Path runDir) {
    return ConfigLoader.parse(yaml(dispatch, routes, runDir), "test", Map.of());
  }

  /** Empties the queue and starts a server with the given dispatch settings and routes. */
  public static TestServer start(String dispatch, String routes) {
    return start(dispatch, routes, null);
  }

  public static TestServer start(String dispatch, String routes, Launcher launcher) {
    Sql.reset();
    Path runDir;
    try {
      runDir = Files.createTempDirectory("oneshot-runs");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    OneshotConfig config = config(dispatch, routes, runDir);
    OneshotServer s =
        launcher == null ? OneshotServer.start(config) : OneshotServer.start(config, launcher);
    return new TestServer(s, config, runDir);
  }

  @Override
  public void close() {
    server.close();
  }
}
