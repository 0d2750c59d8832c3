package io.oneshot.testing;

import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.Launcher;
import io.oneshot.launch.local.LocalCommand;
import io.oneshot.launch.local.LocalLauncher;
import io.oneshot.server.OneshotServer;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiFunction;

/**
 * A whole oneshot (API, dispatcher, rescuer, launcher) on the test database, with short intervals
 * and a run directory of its own. {@link #with()} sets it up.
 */
public final class TestServer implements AutoCloseable {
  public static final String ADMIN_TOKEN = "test-admin-token-0123456789";

  /** Three routes, as in the e2e scenarios: a (limit 4), b (limit 3), c (limit 2). */
  public static final String THREE_ROUTES =
      """
      routes:
        - {name: a, tags: {team: a}, untagged: true, maxConcurrent: 4}
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

  public static Builder with() {
    return new Builder();
  }

  /** What a test server is made of; every part has a default. */
  public static final class Builder {
    /** The dispatch settings a test server has unless a test gives others. */
    public static final String DEFAULT_DISPATCH =
        "pollInterval: 200ms, rescueInterval: 200ms, heartbeatInterval: 200ms";

    private String dispatch = DEFAULT_DISPATCH;
    private String routes = THREE_ROUTES;
    private String limits = "";
    private BiFunction<Vertx, OneshotConfig, Launcher> launchers;
    private String databaseUrl;
    private boolean keepQueue;
    private String api;
    private String launcherYaml;
    private java.time.InstantSource clock = java.time.InstantSource.system();

    public Builder dispatch(String dispatch) {
      this.dispatch = dispatch;
      return this;
    }

    public Builder routes(String routes) {
      this.routes = routes;
      return this;
    }

    public Builder limits(String limits) {
      this.limits = limits;
      return this;
    }

    public Builder launcher(Launcher launcher) {
      this.launchers = (vertx, c) -> launcher;
      return this;
    }

    /** A launcher made on the server's Vert.x instance (the Kubernetes client shares it). */
    public Builder launchers(BiFunction<Vertx, OneshotConfig, Launcher> launchers) {
      this.launchers = launchers;
      return this;
    }

    /** The default {@code api} block with {@code settings} (flow YAML pairs) added to it. */
    public Builder apiWith(String settings) {
      this.api = defaultApi(settings);
      return this;
    }

    private static String defaultApi(String settings) {
      return "{listen: \"127.0.0.1:0\", adminToken: \""
          + ADMIN_TOKEN
          + "\""
          + (settings.isEmpty() ? "" : ", " + settings)
          + "}";
    }

    /** Replaces the {@code api} block (flow YAML). */
    public Builder api(String api) {
      this.api = api;
      return this;
    }

    /**
     * Runs the local launcher's attempts as {@code isolation} says ({@code none} unless set: the
     * tests' scripts meet their test in its temporary directory, which an isolated attempt cannot
     * see; IsolationTest runs them isolated).
     */
    public Builder isolation(String isolation) {
      this.isolation = isolation;
      return this;
    }

    private String isolation = "none";

    /** Replaces the {@code launcher} block (flow YAML). */
    public Builder launcherYaml(String launcher) {
      this.launcherYaml = launcher;
      return this;
    }

    public Builder databaseUrl(String url) {
      this.databaseUrl = url;
      return this;
    }

    /** The clock warm capacity reads its schedule periods and forecasts at. */
    public Builder clock(java.time.InstantSource clock) {
      this.clock = clock;
      return this;
    }

    /** Starts on the queue as it is, instead of emptying it first. */
    public Builder keepQueue() {
      this.keepQueue = true;
      return this;
    }

    /**
     * The local launcher's default provisionerd command, on the jars and archive of {@link
     * ChildJvm}.
     */
    private static List<String> provisionerd() {
      return LocalCommand.defaultCommand(
          List.of(), ChildJvm.archive("provisionerd"), ChildJvm.classPath());
    }

    public OneshotConfig config(Path runDir) {
      String yaml =
          """
          database: {url: "%s", poolSize: 8}
          api: %s
          dispatch: {%s}
          limits: {%s}
          launcher: %s
          %s
          """
              .formatted(
                  databaseUrl == null ? TestDatabase.url() : databaseUrl,
                  api != null ? api : defaultApi(""),
                  dispatch,
                  limits,
                  launcherYaml != null
                      ? launcherYaml
                      : "{kind: local, local: {runDir: %s, command: %s, isolation: %s}}"
                          .formatted(
                              io.oneshot.api.Json.write(runDir.toString()),
                              io.oneshot.api.Json.write(provisionerd()),
                              isolation),
                  routes);
      return ConfigLoader.parse(yaml, "test", Map.of());
    }

    public TestServer start() {
      TestDatabase.url();
      if (!keepQueue) {
        Sql.reset();
      }
      Path runDir = TempDirs.make("oneshot-runs");
      OneshotConfig config = config(runDir);
      OneshotServer s =
          OneshotServer.start(
              config,
              launchers != null
                  ? launchers
                  : (vertx, c) ->
                      OneshotServer.embedding.apply(OneshotServer.launcherFor(vertx, c)),
              clock);
      return new TestServer(s, config, runDir);
    }
  }

  /** The status of a build, read from the database. */
  public static String status(long id) {
    return (String) Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", id);
  }

  /**
   * Stops the server, then the attempts its local launcher left running. A dispatcher leaves them
   * for its successor to adopt, but no test server reuses another's run directory, so none would:
   * they would heartbeat a server that is gone until their lease ran out, taking CPU from the tests
   * after this one.
   */
  @Override
  public void close() {
    try {
      server.close();
    } finally {
      // The default launcher's run directory is runDir; a launcher block may name another.
      try {
        if ("local".equals(config.launcher().kind()) && config.launcher().local() != null) {
          stopAttemptsIn(config.launcher().local().runDir());
        }
      } finally {
        TempDirs.delete(runDir);
      }
    }
  }

  /** The provisionerd processes whose attempt directories are in {@code runDir}. */
  public static List<ProcessHandle> attemptsIn(Path runDir) {
    Path dir = runDir.toAbsolutePath();
    return ProcessHandle.allProcesses()
        .filter(
            p -> LocalLauncher.attemptDirOf(p).map(d -> dir.equals(d.getParent())).orElse(false))
        .toList();
  }

  /**
   * Kills every provisionerd whose attempt directory is in {@code runDir}, with its children, and
   * waits (ten seconds at most) until they are gone, so that nothing writes there any more.
   */
  public static void stopAttemptsIn(Path runDir) {
    List<ProcessHandle> killed = new ArrayList<>();
    attemptsIn(runDir)
        .forEach(
            p -> {
              p.descendants()
                  .forEach(
                      c -> {
                        c.destroyForcibly();
                        killed.add(c);
                      });
              p.destroyForcibly();
              killed.add(p);
            });
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    for (ProcessHandle p : killed) {
      try {
        p.onExit().get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (ExecutionException | TimeoutException e) {
        // still there: its files stay behind, in a temporary directory
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }
}
