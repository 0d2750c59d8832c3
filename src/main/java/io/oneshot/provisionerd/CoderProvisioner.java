package io.oneshot.provisionerd;

import io.oneshot.build.BuildState;
import io.oneshot.config.Units;
import io.oneshot.process.PortOwner;
import io.oneshot.process.Signals;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Runs one Coder job: {@code coder provisioner start} with the route's provisioner key, its output
 * in the build's log, its Prometheus metrics watched on loopback. As soon as the daemon holds a
 * job, the build says so (its timeline, and the dispatcher, which stops counting it as in flight)
 * and the daemon gets SIGTERM: {@code coder provisioner start} then finishes the job it holds,
 * takes no other, and exits (coder/coder enterprise/cli/provisionerdaemonstart.go: the stop signals
 * wait for provisioner jobs; an interrupt does not). When no job comes within the idle timeout (it
 * was taken by another daemon, or canceled), the daemon is stopped and the build fails saying so.
 * Cancel and the route's timeout interrupt the daemon (SIGINT), which cancels its job.
 *
 * <p>From the pod: {@code CODER_URL} and {@code CODER_PROVISIONER_DAEMON_KEY} (the route's key,
 * from a Secret), read by {@code coder} itself; {@code ONESHOT_CODER_BIN}, the {@code coder}
 * executable (default: {@code coder} on the PATH). Where one environment serves every route (the
 * local launcher), {@code CODER_PROVISIONER_DAEMON_KEY_<ROUTE>} (the route's name in capitals, '-'
 * as '_') is the route's key and wins over the plain variable.
 */
final class CoderProvisioner implements Provisioner {
  static final String KEY_ENV = "CODER_PROVISIONER_DAEMON_KEY";
  static final String URL_ENV = "CODER_URL";
  static final String BIN_ENV = "ONESHOT_CODER_BIN";
  static final Duration DEFAULT_IDLE = Duration.ofMinutes(2);

  /**
   * The daemon's gauge of jobs it runs, and the count of jobs it finished (coder/coder
   * provisionerd/provisionerd.go, {@code NewMetrics}: coderd_provisionerd_jobs_current and
   * coderd_provisionerd_job_timings_seconds, observed as each job ends).
   */
  static final String JOBS_CURRENT = "coderd_provisionerd_jobs_current";

  static final String JOBS_FINISHED = "coderd_provisionerd_job_timings_seconds_count";

  /** How long a daemon may take to start (to answer on its metrics address), at least. */
  static final Duration STARTUP = Duration.ofSeconds(60);

  /** How often the daemon's metrics are read while it runs. */
  static final Duration WATCH_EVERY = Duration.ofMillis(100);

  @Override
  public Result run(RunContext ctx) throws InterruptedException {
    Map<String, String> env = new HashMap<>(ctx.env());
    String routeKey = env.get(routeKeyVariable(ctx.build().route()));
    if (routeKey != null && !routeKey.isBlank()) {
      env.put(KEY_ENV, routeKey);
    }
    // Other routes' keys are not this daemon's business.
    env.keySet().removeIf(k -> k.startsWith(KEY_ENV + "_"));
    for (String required : List.of(URL_ENV, KEY_ENV)) {
      if (env.get(required) == null || env.get(required).isBlank()) {
        String error =
            required
                + " is not set: the route's Job template gives the coder container "
                + (required.equals(KEY_ENV)
                    ? "the route's provisioner key from a Secret"
                    : "the URL of Coder")
                + " (job-templates/coder.yaml)";
        ctx.system("error", error);
        return new Result(BuildState.FAILED, null, error);
      }
    }
    String name =
        io.oneshot.source.CoderOutcome.daemonName(ctx.build().buildId(), ctx.build().attempt());
    Duration idle = idleTimeout(ctx);
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    } catch (IOException e) {
      String error = "cannot find a free loopback port for the daemon's metrics: " + e.getMessage();
      ctx.system("error", error);
      return new Result(BuildState.FAILED, null, error);
    }
    String bin = env.getOrDefault(BIN_ENV, "coder");
    List<String> command =
        List.of(
            bin,
            "provisioner",
            "start",
            "--name",
            name,
            // Debug logs include provisionerd's "acquired job" line, the earliest sign of a job.
            "--verbose",
            "--prometheus-enable",
            "--prometheus-address",
            "127.0.0.1:" + port);
    ProcessBuilder pb = new ProcessBuilder(command).directory(ctx.workDir().toFile());
    pb.environment().clear();
    pb.environment().putAll(env);
    ctx.milestone(
        "coder",
        "Coder daemon "
            + name
            + " started; it takes one job, and stops if none comes within "
            + Units.format(idle));
    Watch watch = new Watch(ctx, name, port, idle);
    RunContext.Exit exit;
    try {
      exit = ctx.run(pb, RunContext.Interrupt.INT, "coder", watch::line, watch::start);
    } catch (IOException e) {
      String error = "cannot start " + bin + ": " + e.getMessage();
      ctx.system("error", error);
      return new Result(BuildState.FAILED, 127, error);
    } finally {
      watch.stop();
    }
    if (watch.finished > 1) {
      ctx.system(
          "warn",
          "the daemon finished "
              + watch.finished
              + " jobs: a job ended before it was seen, and the daemon took another");
    }
    if (exit.stoppedBy() != null) {
      return ctx.stopped(exit.stoppedBy(), exit.code());
    }
    if (watch.idled) {
      String error =
          "no Coder job came within the idle timeout of "
              + Units.format(idle)
              + ": another daemon took it, or it was canceled in Coder";
      ctx.system("warn", error);
      return new Result(BuildState.FAILED, exit.code(), error);
    }
    if (!watch.taken) {
      String error =
          "coder provisioner start exited with code " + exit.code() + " before taking a job";
      ctx.system("error", error);
      return new Result(BuildState.FAILED, exit.code(), error);
    }
    if (exit.code() == 0) {
      ctx.system("info", "the Coder daemon finished its job and exited");
      return new Result(BuildState.SUCCEEDED, 0, null);
    }
    String error = "coder provisioner start exited with code " + exit.code();
    ctx.system("error", error);
    return new Result(BuildState.FAILED, exit.code(), error);
  }

  /** The variable that holds a route's own key: CODER_PROVISIONER_DAEMON_KEY_CODER_PROD. */
  static String routeKeyVariable(String route) {
    return io.oneshot.config.OneshotConfig.Route.coderKeyVariable(route);
  }

  private static Duration idleTimeout(RunContext ctx) {
    long ms = ctx.input().path("idleTimeoutMs").asLong(0);
    return ms > 0 ? Duration.ofMillis(ms) : DEFAULT_IDLE;
  }

  /**
   * Watches the daemon's metrics on its own thread: the first sign of a job (one running, or one
   * finished) marks the build as holding it and sends SIGTERM; no sign within the idle timeout
   * sends SIGTERM too.
   */
  private static final class Watch {
    private final RunContext ctx;
    private final String name;
    private final int port;
    private final URI metrics;
    private final Duration idle;
    private final AtomicReference<Thread> thread = new AtomicReference<>();
    private volatile boolean running = true;
    volatile boolean taken;
    volatile boolean idled;
    volatile long finished;

    Watch(RunContext ctx, String name, int port, Duration idle) {
      this.ctx = ctx;
      this.name = name;
      this.port = port;
      this.metrics = URI.create("http://127.0.0.1:" + port + "/metrics");
      this.idle = idle;
    }

    private volatile Process process;

    /** Who listens on the metrics port, once that is settled; null until then. */
    private PortOwner.Owner owner;

    private boolean ours() {
      if (owner == null) {
        PortOwner.Owner now = new PortOwner().of(process.toHandle(), port);
        if (now == PortOwner.Owner.ANOTHER) {
          ctx.system(
              "warn",
              "another process listens on port "
                  + port
                  + ", where daemon "
                  + name
                  + " was told to serve its metrics; they are not read, and its log alone says"
                  + " when it takes a job");
        }
        if (now != PortOwner.Owner.NOBODY) {
          owner = now;
        }
      }
      return owner == PortOwner.Owner.THIS_TREE || owner == PortOwner.Owner.UNKNOWN;
    }

    void start(Process p) {
      process = p;
      thread.set(Thread.ofPlatform().name("provisionerd-coder").daemon().start(() -> watch(p)));
    }

    void stop() throws InterruptedException {
      running = false;
      Thread t = thread.get();
      if (t != null) {
        t.join(5_000);
      }
    }

    private void watch(Process p) {
      // The idle clock starts once the daemon answers (it is up); until then it may take as long
      // as STARTUP to start, however short the idle timeout.
      long deadline = System.nanoTime() + Math.max(idle.toNanos(), STARTUP.toNanos());
      boolean up = false;
      try {
        while (running && p.isAlive()) {
          Jobs j = read();
          if (j != null) {
            finished = j.finished();
            if (!up) {
              up = true;
              deadline = System.nanoTime() + idle.toNanos();
            }
          }
          if (!taken && j != null && (j.current() > 0 || j.finished() > 0)) {
            took();
          } else if (!taken && !idled && System.nanoTime() > deadline) {
            idled = true;
            ctx.system(
                "warn",
                (up
                        ? "no Coder job came within " + Units.format(idle)
                        : "the daemon's metrics did not answer within "
                            + Units.format(
                                Duration.ofNanos(Math.max(idle.toNanos(), STARTUP.toNanos()))))
                    + "; stopping daemon "
                    + name);
            Signals.send(p.pid(), Signals.Signal.SIGTERM);
          }
          Thread.sleep(WATCH_EVERY.toMillis());
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    /**
     * A line of the daemon's output, into the build's log; provisionerd's "acquired job" (a debug
     * line: coder/coder provisionerd/provisionerd.go, acquireAndRunOne) is the earliest sign that
     * it holds a job, before its metrics say so.
     */
    void line(String stream, String text) {
      ctx.line(stream, null, "coder", text);
      if (!taken && text.contains("acquired job")) {
        try {
          took();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    }

    /**
     * The daemon holds a job: SIGTERM at once (it finishes that job, takes no other), then say so.
     */
    private synchronized void took() throws InterruptedException {
      if (taken) {
        return;
      }
      taken = true;
      Signals.send(process.pid(), Signals.Signal.SIGTERM);
      // The timeline's step comes with the report (one event, written by the dispatcher).
      ctx.system("info", "took a Coder job: daemon " + name + " runs it, then exits");
      ctx.tookJob("took a Coder job (daemon " + name + ")");
    }

    /**
     * The daemon's job counts, or null while its metrics do not answer (it is starting) or cannot
     * be its own. The port was free when it was picked, but another process (another build's
     * daemon, under the local launcher) may have taken it before the daemon bound it; {@code coder
     * provisioner start} then only logs that it cannot listen ("http server listen": coder/coder
     * cli/server.go, ServeHandler) and runs on. What answers there must not be taken for the
     * daemon, or another daemon's job would end this build's wait. So the port is read only once
     * the daemon's own process tree is seen listening on it ({@link PortOwner}), or where that
     * cannot be told (no /proc); its log's "acquired job" still says when it takes one.
     */
    private Jobs read() {
      if (!ours()) {
        return null;
      }
      try {
        HttpURLConnection c = (HttpURLConnection) metrics.toURL().openConnection();
        c.setConnectTimeout(500);
        c.setReadTimeout(2_000);
        if (c.getResponseCode() != 200) {
          return null;
        }
        try (InputStream in = c.getInputStream()) {
          return Jobs.parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
      } catch (IOException e) {
        return null;
      }
    }
  }

  /** The jobs a daemon runs now and has finished, from its Prometheus text. */
  record Jobs(long current, long finished) {
    private static final Pattern SAMPLE =
        Pattern.compile("^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{[^}]*})?\\s+([-+0-9.eE]+|NaN)(\\s.*)?$");

    static Jobs parse(String text) {
      double current = 0;
      double finished = 0;
      for (String line : text.split("\n")) {
        Matcher m = SAMPLE.matcher(line.strip());
        if (!m.matches() || m.group(3).equals("NaN")) {
          continue;
        }
        if (m.group(1).equals(JOBS_CURRENT)) {
          current += Double.parseDouble(m.group(3));
        } else if (m.group(1).equals(JOBS_FINISHED)) {
          finished += Double.parseDouble(m.group(3));
        }
      }
      return new Jobs(Math.round(current), Math.round(finished));
    }
  }
}
