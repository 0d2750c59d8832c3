package io.oneshot.testing;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.launch.local.SharedArchive;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * {@code oneshot dispatcher} as its own process, on this JVM's class path, so that it can be killed
 * for real: SIGKILL leaves no cleanup, as when a node or a container dies. Its configuration lets
 * it pick its API port ({@code listen: "127.0.0.1:0"}); {@link #port()} is the one it reported in
 * its log at this start, so that a restart never races another process for a port picked before.
 */
public final class DispatcherProcess {
  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofMillis(500)).build();

  public final String name;
  private final Path config;
  private final Path logDir;
  private volatile Map<String, String> env;
  private static final List<String> DEFAULT_JVM =
      List.of("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m");
  private volatile List<String> jvm = DEFAULT_JVM;
  private Process process;
  private int starts;
  private volatile Path log;
  private volatile int port = -1;

  private final int fixedPort;

  /** A dispatcher whose configuration lets it pick its API port at every start. */
  public DispatcherProcess(String name, Path config, Path logDir, Map<String, String> env) {
    this(name, -1, config, logDir, env);
  }

  /**
   * A dispatcher whose configuration names its API port ({@code fixedPort}): for one that is not
   * restarted, or whose clients must find it where they were told.
   */
  public DispatcherProcess(
      String name, int fixedPort, Path config, Path logDir, Map<String, String> env) {
    this.name = name;
    this.fixedPort = fixedPort;
    this.config = config;
    this.logDir = logDir;
    this.env = env;
  }

  /**
   * An API "Service" for {@code dispatchers}: one address that forwards to whichever of them is up,
   * at the port each reported at its latest start.
   */
  public static TcpProxy service(List<DispatcherProcess> dispatchers) {
    return new TcpProxy(
        () ->
            dispatchers.stream()
                .mapToInt(DispatcherProcess::port)
                .filter(p -> p > 0)
                .mapToObj(p -> new java.net.InetSocketAddress("127.0.0.1", p))
                .toList());
  }

  public synchronized DispatcherProcess start() {
    List<String> cmd = new ArrayList<>(wrapper);
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(jvm);
    // Vert.x's file cache in the log directory: a dispatcher killed on purpose cannot delete it,
    // and would leave one in the machine's temporary directory at each kill.
    cmd.add("-Dvertx.cacheDirBase=" + logDir.resolve("vertx-cache").toAbsolutePath());
    // From jars with an archive, as the image starts it; a footprint measure keeps its own.
    boolean shared = jvm == DEFAULT_JVM;
    SharedArchive.Use use = shared ? ChildJvm.sharedArchive("dispatcher").next() : null;
    if (use != null) {
      cmd.add("-Xshare:auto");
      cmd.addAll(use.flags());
    }
    cmd.add("-cp");
    cmd.add(
        String.join(
            File.pathSeparator,
            shared
                ? ChildJvm.classPath()
                : io.oneshot.launch.local.LocalCommand.absoluteClassPath()));
    // oneshot's own main, proving runners behind a test's proxy as the connections it forwards.
    cmd.add(ProxiedDispatcher.class.getName());
    cmd.add("dispatcher");
    cmd.add("--config");
    cmd.add(config.toString());
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().putAll(env);
    Path out = logDir.resolve(name + "-" + ++starts + ".log");
    pb.redirectErrorStream(true).redirectOutput(out.toFile());
    port = -1;
    log = out;
    try {
      process = pb.start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    if (use != null) {
      ChildJvm.sharedArchive("dispatcher").watch(use, process);
    }
    return this;
  }

  private static final java.util.regex.Pattern UP =
      java.util.regex.Pattern.compile("oneshot is up: API on port (\\d+)");

  /** The API port this start of the process listens on; -1 until it has said so in its log. */
  public int port() {
    if (fixedPort > 0) {
      return fixedPort;
    }
    int p = port;
    Path current = log;
    if (p > 0 || current == null) {
      return p;
    }
    try {
      java.util.regex.Matcher m = UP.matcher(java.nio.file.Files.readString(current));
      if (m.find() && current == log) {
        port = Integer.parseInt(m.group(1));
      }
    } catch (IOException | RuntimeException e) {
      // not written yet
    }
    return port;
  }

  private volatile List<String> wrapper = List.of();

  /** A command the next {@link #start()} runs the JVM under, e.g. {@code ip netns exec NS}. */
  public DispatcherProcess under(List<String> command) {
    this.wrapper = List.copyOf(command);
    return this;
  }

  /** The JVM options of the next {@link #start()} (default: small and quick to start). */
  public DispatcherProcess jvm(List<String> options) {
    this.jvm = List.copyOf(options);
    return this;
  }

  /** The environment of the next {@link #start()}. */
  public void env(Map<String, String> env) {
    this.env = env;
  }

  public synchronized boolean alive() {
    return process != null && process.isAlive();
  }

  public synchronized Process process() {
    return process;
  }

  /** SIGKILL (leaving no {@code jcmd} socket behind: {@link ChildJvm#kill}). */
  public synchronized void kill() {
    if (process != null) {
      try {
        ChildJvm.kill(process);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** SIGTERM; does not wait. */
  public synchronized void term() {
    if (process != null) {
      process.destroy();
    }
  }

  /** {@code /readyz} of this replica, or null when it does not answer. */
  public JsonNode ready() {
    HttpResponse<String> r = get("/readyz");
    try {
      return r == null ? null : Json.tree(r.body());
    } catch (RuntimeException e) {
      return null;
    }
  }

  /** {@code /metrics} of this replica, or null when it does not answer. */
  public PromText metrics() {
    HttpResponse<String> r = get("/metrics");
    return r != null && r.statusCode() == 200 ? PromText.parse(r.body()) : null;
  }

  /** GET {@code path} from this replica; null when it does not answer within 2 s. */
  private HttpResponse<String> get(String path) {
    int port = port();
    if (port < 0) {
      return null;
    }
    try {
      return HTTP.send(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
              .timeout(Duration.ofSeconds(2))
              // /metrics on the API's port takes the admin token, which the tests' configs share.
              .header("Authorization", "Bearer " + TestServer.ADMIN_TOKEN)
              .build(),
          HttpResponse.BodyHandlers.ofString());
    } catch (IOException | RuntimeException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  public boolean leads() {
    JsonNode r = ready();
    return r != null && r.path("leader").asBoolean(false);
  }

  public int starts() {
    return starts;
  }
}
