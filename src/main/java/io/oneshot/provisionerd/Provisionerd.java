package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import io.oneshot.build.BuildState;
import io.oneshot.build.Runner;
import io.oneshot.build.Sensitive;
import io.oneshot.config.Units;
import io.oneshot.process.Signals;
import java.io.PrintStream;
import java.net.URI;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one-shot runner: acquire the build its token is good for, run it, stream its log, heartbeat,
 * report the outcome, exit. It never sees database credentials; everything goes through the runner
 * API with the build token.
 *
 * <p>Every call names this process as a runner ({@link Runner}: a random id, and in a pod the pod's
 * name and UID). The first acquire binds the attempt to it; a second process with the same token is
 * refused and runs nothing. While the provisioner runs, the lease handed over at acquire is renewed
 * by every accepted heartbeat or log batch; when none was accepted for the lease, the provisioner
 * is stopped (interrupt, the cancel grace, kill) before the dispatcher could take the attempt for
 * lost, so that a runner cut off from the API never applies beside another one.
 *
 * <p>SIGTERM (a pod deleted or evicted, a node drained) is not a cancel: the build goes on to its
 * end, the log says so, and this provisionerd takes no other; cancel and the route's timeout, which
 * come through the API, are the only interrupts, and the kubelet's SIGKILL at the end of the pod's
 * termination grace the only kill. Any other shutdown of the JVM (SIGINT, SIGHUP) stops the build
 * as a cancel.
 *
 * <p>The exit code is the build's outcome, so that {@code kubectl get jobs} tells the truth: 0 the
 * build succeeded; {@value #BUILD_FAILED} it failed; {@value #BUILD_CANCELED} it was canceled;
 * {@value #ENDED_ELSEWHERE} it ended elsewhere meanwhile (failed as hung, requeued), and nothing
 * was reported; 1 the outcome could not be reported; 2 bad setup (no token, no API URL); 3 the API
 * refused the token at acquire; {@value #HELD_ELSEWHERE} another runner holds the attempt, and
 * nothing was run; 143 SIGTERM came before the build was acquired (the JVM's own handling), and
 * nothing was run.
 */
public final class Provisionerd {
  private static final Logger log = LoggerFactory.getLogger(Provisionerd.class);

  /** Exit code: another runner holds the attempt; this one ran nothing. */
  public static final int HELD_ELSEWHERE = 5;

  /**
   * Exit code: the API refused the attempt at its acquire (401: this process is not the runner
   * oneshot launched for it, or the token is no current attempt's; 409, 410): nothing ran.
   */
  public static final int REFUSED = 3;

  /** Exit code: the build failed (its outcome was reported). */
  public static final int BUILD_FAILED = 10;

  /** Exit code: the build was canceled (its outcome was reported). */
  public static final int BUILD_CANCELED = 11;

  /** Exit code: the build ended elsewhere while this runner ran it; nothing was reported. */
  public static final int ENDED_ELSEWHERE = 12;

  /** Where the build runs and how to reach the API. */
  public record Options(URI apiUrl, String token, Path workDir, Duration retryBudget) {}

  /**
   * This process as a runner: a random id, and what the environment says of where it runs ({@code
   * ONESHOT_POD_NAME} and {@code ONESHOT_POD_UID}, set from the downward API in a pod).
   */
  static Runner thisRunner(Map<String, String> env) {
    byte[] random = new byte[16];
    new SecureRandom().nextBytes(random);
    return new Runner(
        HexFormat.of().formatHex(random),
        blankToNull(env.get("ONESHOT_POD_NAME")),
        blankToNull(env.get("ONESHOT_POD_UID")),
        blankToNull(env.getOrDefault("HOSTNAME", hostname())),
        ProcessHandle.current().pid());
  }

  private static String hostname() {
    try {
      return java.nio.file.Files.readString(Path.of("/etc/hostname")).strip();
    } catch (java.io.IOException | RuntimeException e) {
      return null;
    }
  }

  private static String blankToNull(String s) {
    return s == null || s.isBlank() ? null : s.strip();
  }

  private Provisionerd() {}

  public static int run(Options o, PrintStream out) {
    // Retries are ours (bounded, logged); the JDK's silent resend of a POST is not wanted.
    System.setProperty("sun.net.http.retryPost", "false");
    Runner runner = thisRunner(System.getenv());
    String proof = System.getenv("ONESHOT_RUNNER_PROOF_FILE");
    RunnerClient client =
        new RunnerClient(
            o.apiUrl(),
            o.token(),
            o.retryBudget(),
            runner,
            proof == null || proof.isBlank() ? null : java.nio.file.Path.of(proof));
    AcquiredBuild build;
    try {
      build = AcquiredBuild.of(client.acquire());
    } catch (RunnerClient.Refused e) {
      if (e.heldByOther) {
        String line =
            "another runner holds this attempt: "
                + e.getMessage()
                + "; this one ("
                + runner.describe()
                + ") runs nothing and exits";
        out.println(line);
        log.error("{}.", line);
        return HELD_ELSEWHERE;
      }
      log.error("The API refused this attempt ({}): {}.", e.status, e.getMessage());
      return REFUSED;
    } catch (RunnerClient.Unreachable e) {
      log.error("Cannot acquire the build: {}.", e.getMessage());
      return 1;
    } catch (InterruptedException e) {
      return 1;
    }
    // From the acquire on, SIGTERM is a drain (before it, the JVM's own handling ends this
    // provisionerd, which has taken no build).
    Drain drain = new Drain();
    Runnable restore = Signals.handle("TERM", drain::term);
    try {
      return run(o, out, runner, client, build, drain, restore != null);
    } finally {
      // The JVM's own handling back (provisionerd run in another program's JVM: the tests).
      if (restore != null) {
        restore.run();
      }
    }
  }

  private static int run(
      Options o,
      PrintStream out,
      Runner runner,
      RunnerClient client,
      AcquiredBuild build,
      Drain drain,
      boolean drains) {
    long buildId = build.buildId();
    log.info(
        "Build {}: acquired as {}; lease {}.",
        buildId,
        runner.describe(),
        Units.format(build.lease()));
    Duration timeout = build.timeout();
    Duration grace = build.cancelGrace();
    long heartbeatMs = build.heartbeatMs();

    CompletableFuture<StopReason> stop = new CompletableFuture<>();
    CountDownLatch finished = new CountDownLatch(1);
    // SIGTERM is the drain above; any other end of the JVM (SIGINT, SIGHUP, or SIGTERM where it
    // could not be handled) stops the build as a cancel, within the grace.
    Thread hook =
        new Thread(
            () -> {
              stop.complete(StopReason.TERMINATED);
              try {
                finished.await(grace.toMillis() + 30_000, TimeUnit.MILLISECONDS);
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            },
            "provisionerd-sigterm");
    Runtime.getRuntime().addShutdownHook(hook);

    LogShipper shipper =
        new LogShipper(
            client,
            out,
            reply -> {
              if (reply != null && reply.path("cancelRequested").asBoolean(false)) {
                stop.complete(StopReason.CANCELED);
              }
            },
            refused -> onRefused(stop, refused),
            new Masker(Sensitive.texts(build.input())));
    ScheduledExecutorService timers =
        Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().name("provisionerd-heartbeat").daemon().factory());
    AtomicBoolean reporting = new AtomicBoolean();
    Duration lease = build.lease();
    Duration heartbeatTimeout = heartbeatTimeout(heartbeatMs, lease);
    timers.scheduleWithFixedDelay(
        () -> heartbeat(client, stop, reporting, heartbeatTimeout),
        heartbeatMs,
        heartbeatMs,
        TimeUnit.MILLISECONDS);
    // Its own thread: a heartbeat that hangs must not hold up the check.
    ScheduledExecutorService watchdog =
        Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().name("provisionerd-lease").daemon().factory());
    long checkMs = Math.max(50, Math.min(1000, lease.toMillis() / 10));
    watchdog.scheduleWithFixedDelay(
        () -> {
          Duration quiet = client.sinceRenewed();
          if (!reporting.get()
              && quiet.compareTo(lease) > 0
              && stop.complete(StopReason.LEASE_EXPIRED)) {
            log.warn(
                "Build {}: no heartbeat accepted for {} (the lease is {}); stopping the"
                    + " provisioner.",
                buildId,
                Units.format(quiet),
                Units.format(lease));
          }
        },
        checkMs,
        checkMs,
        TimeUnit.MILLISECONDS);
    timers.schedule(
        () -> stop.complete(StopReason.TIMED_OUT), timeout.toMillis(), TimeUnit.MILLISECONDS);
    if (build.cancelRequested()) {
      stop.complete(StopReason.CANCELED);
    }

    Map<String, String> env = new HashMap<>(System.getenv());
    env.remove("ONESHOT_TOKEN");
    env.remove("ONESHOT_TOKEN_FILE");
    RunContext ctx =
        new RunContext(
            build,
            o.workDir(),
            env,
            shipper,
            stop,
            state -> saveState(client, state, stop),
            what -> tookJob(client, what, stop));
    if (!drains) {
      ctx.system(
          "warn",
          "provisionerd cannot handle SIGTERM in this JVM: a deleted or evicted pod cancels the"
              + " build");
    }
    drain.to(
        () -> {
          String line =
              "provisionerd got SIGTERM (its pod is being deleted or evicted, or its node drained):"
                  + " build "
                  + buildId
                  + " goes on to its end, and this provisionerd takes no other; `oneshot builds"
                  + " cancel "
                  + buildId
                  + "` stops it";
          log.warn("{}.", line);
          ctx.system("warn", line);
        });
    ctx.system(
        "info",
        "provisionerd acquired build "
            + buildId
            + " (attempt "
            + build.attempt()
            + ", route "
            + build.route()
            + ", timeout "
            + Units.format(timeout)
            + (build.workspace() == null ? "" : ", workspace " + build.workspace())
            + ")");

    Optional<MemoryCgroup> memory = MemoryCgroup.find();
    long oomBefore = memory.map(MemoryCgroup::oomKills).orElse(-1L);
    Optional<CpuCgroup> cpu = CpuCgroup.find();
    Optional<CpuCgroup.Sample> cpuBefore = cpu.flatMap(CpuCgroup::sample);
    Provisioner.Result result;
    try {
      result = runProvisioner(ctx, stop);
    } catch (InterruptedException e) {
      result = new Provisioner.Result(BuildState.FAILED, null, "provisionerd was interrupted");
    } catch (RuntimeException e) {
      log.error("Build {}: the provisioner failed.", buildId, e);
      result = new Provisioner.Result(BuildState.FAILED, null, "provisioner error: " + e);
    }
    result = withOomKills(ctx, result, memory, oomBefore);
    ObjectNode usage = usage(ctx, memory, oomBefore, cpu, cpuBefore);
    shipper.close();

    int code;
    if (stop.getNow(null) == StopReason.LOST) {
      log.warn("Build {}: the build ended elsewhere; nothing to report.", buildId);
      code = ENDED_ELSEWHERE;
    } else {
      // Heartbeats go on until the outcome is acknowledged: while `complete` is retried, they
      // tell the dispatcher that this attempt is alive and still owes its outcome.
      reporting.set(true);
      code = exitCode(report(client, buildId, masked(result, shipper.masker()), usage));
    }
    timers.shutdownNow();
    watchdog.shutdownNow();
    finished.countDown();
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException e) {
      // already shutting down: the hook has seen `finished`
    }
    return code;
  }

  private static Provisioner.Result runProvisioner(
      RunContext ctx, CompletableFuture<StopReason> stop) throws InterruptedException {
    if (stop.isDone()) {
      return ctx.stopped(stop.getNow(null), null);
    }
    String kind = ctx.input().path("provisioner").asText();
    Provisioner p =
        switch (kind) {
          case "script" -> new ScriptProvisioner();
          case "terraform" -> new TerraformProvisioner();
          case "pulumi" -> new PulumiProvisioner();
          case "coder" -> new CoderProvisioner();
          default -> null;
        };
    if (p == null) {
      String error = "provisioner '" + kind + "' is not available in this provisionerd";
      ctx.system("error", error);
      return new Provisioner.Result(BuildState.FAILED, null, error);
    }
    return p.run(ctx);
  }

  /**
   * Tells the dispatcher that this build's runner took its source's job, so that the job's build no
   * longer counts as in flight; a refusal means the build ended elsewhere.
   */
  private static void tookJob(RunnerClient client, String what, CompletableFuture<StopReason> stop)
      throws InterruptedException {
    com.fasterxml.jackson.databind.node.ObjectNode body = Json.MAPPER.createObjectNode();
    body.put("what", what);
    try {
      client.tookJob(Json.write(body));
    } catch (RunnerClient.Refused e) {
      onRefused(stop, e);
    } catch (RunnerClient.Unreachable e) {
      log.warn("Could not report the job taken: {}.", e.getMessage());
    }
  }

  /** Uploads the workspace's state as it is now; a refusal means the build ended elsewhere. */
  private static void saveState(
      RunnerClient client, String state, CompletableFuture<StopReason> stop)
      throws InterruptedException {
    com.fasterxml.jackson.databind.node.ObjectNode body = Json.MAPPER.createObjectNode();
    body.put("state", state);
    try {
      client.state(Json.write(body));
    } catch (RunnerClient.Refused e) {
      onRefused(stop, e);
    } catch (RunnerClient.Unreachable e) {
      log.warn("Could not save the state while the build runs: {}.", e.getMessage());
    }
  }

  /**
   * One heartbeat. Once the outcome is being reported, a refusal is expected (the outcome may have
   * just been taken, and the attempt is over) and means nothing more.
   */
  private static void heartbeat(
      RunnerClient client,
      CompletableFuture<StopReason> stop,
      AtomicBoolean reporting,
      Duration timeout) {
    try {
      JsonNode reply = client.heartbeat(timeout);
      if (reply.path("cancelRequested").asBoolean(false)) {
        stop.complete(StopReason.CANCELED);
      }
    } catch (RunnerClient.Refused e) {
      if (!reporting.get()) {
        onRefused(stop, e);
      }
    } catch (RunnerClient.Unreachable e) {
      log.warn("Heartbeat failed: {}.", e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * How long one heartbeat may wait for its answer: two intervals, at least a second, at most half
   * the lease, so that one that hangs cannot run out the lease by itself.
   */
  static Duration heartbeatTimeout(long heartbeatMs, Duration lease) {
    long ms = Math.max(1000, 2 * heartbeatMs);
    return Duration.ofMillis(Math.max(100, Math.min(ms, lease.toMillis() / 2)));
  }

  private static void onRefused(CompletableFuture<StopReason> stop, RunnerClient.Refused e) {
    if (e.status == 410 || e.status == 401 || e.heldByOther) {
      log.warn("The API says this attempt is over ({}); stopping.", e.getMessage());
      stop.complete(StopReason.LOST);
    } else {
      log.warn("The API refused a call ({}): {}.", e.status, e.getMessage());
    }
  }

  /** The result with the sensitive values masked in its error. */
  private static Provisioner.Result masked(Provisioner.Result r, Masker masker) {
    String error = masker.mask(r.error());
    return java.util.Objects.equals(error, r.error()) ? r : r.withError(error);
  }

  /** The exit code for the build's status as the API answered the outcome; null: not reported. */
  static int exitCode(String status) {
    if (status == null) {
      return 1;
    }
    return switch (status) {
      case "succeeded" -> 0;
      case "canceled" -> BUILD_CANCELED;
      default -> BUILD_FAILED;
    };
  }

  /**
   * The result, its error saying so when the kernel's OOM killer killed processes of the build
   * while it ran (counted in the memory cgroup: such a process dies of SIGKILL without a word).
   */
  private static Provisioner.Result withOomKills(
      RunContext ctx, Provisioner.Result r, Optional<MemoryCgroup> memory, long before) {
    if (memory.isEmpty() || before < 0) {
      return r;
    }
    long killed = memory.get().oomKills() - before;
    if (killed <= 0) {
      return r;
    }
    com.fasterxml.jackson.databind.JsonNode asked =
        ctx.input().path("pod").path("resources").path("limits").path("memory");
    String note =
        memory
            .get()
            .note(
                killed,
                ctx.build().buildId(),
                asked.isTextual() ? "limits.memory " + asked.asText() : null);
    if (r.outcome() == BuildState.SUCCEEDED) {
      ctx.system("warn", note);
      return r;
    }
    ctx.system("error", note);
    return r.withError(r.error() == null ? note : r.error() + "; " + note);
  }

  /**
   * What the build met of its pod's limits, for its outcome's report: processes the OOM killer
   * killed and the memory limit, time throttled for the CPU limit (said in its log too, with how to
   * run it again with more); null when no cgroup could be read.
   */
  private static ObjectNode usage(
      RunContext ctx,
      Optional<MemoryCgroup> memory,
      long oomBefore,
      Optional<CpuCgroup> cpu,
      Optional<CpuCgroup.Sample> cpuBefore) {
    ObjectNode u = Json.MAPPER.createObjectNode();
    if (memory.isPresent() && oomBefore >= 0) {
      long kills = memory.get().oomKills() - oomBefore;
      u.put("oomKills", Math.max(0, kills));
      memory.get().limitBytes().ifPresent(b -> u.put("memoryLimitBytes", b));
    }
    Optional<CpuCgroup.Sample> after = cpu.flatMap(CpuCgroup::sample);
    if (cpu.isPresent() && cpuBefore.isPresent() && after.isPresent()) {
      u.put(
          "cpuThrottledSeconds",
          Math.round(CpuCgroup.throttledSeconds(cpuBefore.get(), after.get()) * 1000) / 1000.0);
      cpu.get().limitCores().ifPresent(c -> u.put("cpuLimitCores", c));
      cpu.get()
          .note(cpuBefore.get(), after.get(), ctx.build().buildId())
          .ifPresent(n -> ctx.system("warn", n));
    }
    return u.isEmpty() ? null : u;
  }

  /** The build's status once the outcome is taken; null when it could not be reported. */
  private static String report(
      RunnerClient client, long buildId, Provisioner.Result r, ObjectNode usage) {
    ObjectNode body = Json.MAPPER.createObjectNode();
    if (usage != null) {
      body.set("usage", usage);
    }
    body.put("outcome", r.outcome().wire());
    if (r.exitCode() != null) {
      body.put("exitCode", r.exitCode());
    }
    if (r.error() != null) {
      body.put("error", r.error());
    }
    if (r.outputs() != null) {
      body.set("outputs", r.outputs());
    }
    if (r.state() != null) {
      body.put("state", r.state());
    }
    try {
      JsonNode reply = client.complete(Json.write(body));
      String status = reply.path("status").asText(r.outcome().wire());
      log.info("Build {}: reported {}; the build is {}.", buildId, r.outcome().wire(), status);
      return status;
    } catch (RunnerClient.Refused e) {
      log.error(
          "Build {}: the API refused the outcome ({}): {}.", buildId, e.status, e.getMessage());
      return null;
    } catch (RunnerClient.Unreachable e) {
      log.error("Build {}: cannot report the outcome: {}.", buildId, e.getMessage());
      return null;
    } catch (InterruptedException e) {
      return null;
    }
  }

  /**
   * SIGTERM as a drain: once it came, the build's log says so once, as soon as there is a build to
   * say it to (the signal may come before the build is acquired, or while it is being).
   */
  private static final class Drain {
    private boolean termed;
    private Runnable say;
    private boolean said;

    synchronized void term() {
      termed = true;
      sayOnce();
    }

    synchronized boolean termed() {
      return termed;
    }

    synchronized void to(Runnable say) {
      this.say = say;
      sayOnce();
    }

    private void sayOnce() {
      if (termed && say != null && !said) {
        said = true;
        say.run();
      }
    }
  }
}
