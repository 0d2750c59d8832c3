package io.oneshot.api;

import static io.oneshot.api.Http.bearer;
import static io.oneshot.api.Http.bodyObject;
import static io.oneshot.api.Http.errorBody;
import static io.oneshot.api.Http.fail;
import static io.oneshot.api.Http.json;
import static io.oneshot.api.Http.rejectUnknownFields;
import static io.oneshot.api.Http.textOrNull;
import static io.oneshot.api.Http.unauthorized;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.AuditStore;
import io.oneshot.build.BuildState;
import io.oneshot.build.BuildStore;
import io.oneshot.build.BuildToken;
import io.oneshot.build.Runner;
import io.oneshot.build.RunnerStore;
import io.oneshot.build.StateStore;
import io.oneshot.config.OneshotConfig;
import io.oneshot.config.Units;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.RunnerCall;
import io.oneshot.launch.RunnerProof;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.net.SocketAddress;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The runner's API, {@code /api/v1/runner/*}, as provisionerd calls it in order: acquire, then
 * heartbeats and log batches while the build runs, then complete. The bearer is the attempt's build
 * token; the runner names itself in headers ({@link RunnerHeaders}), and after the first acquire
 * only that runner may call: any other is refused with 409 and made visible ({@link #conflict}).
 * State uploads are {@link WorkspaceStateApi}'s.
 */
final class RunnerApi {
  private static final Logger log = LoggerFactory.getLogger(RunnerApi.class);
  private static final Set<String> LINE_FIELDS =
      Set.of("ts", "stream", "level", "stage", "text", "milestone");
  private static final Set<String> STREAMS = Set.of("stdout", "stderr", "system");
  private static final int MAX_LINES_PER_BATCH = 1000;

  private final BuildStore store;
  private final OneshotConfig config;
  private final Metrics metrics;
  private final Consumer<RunnerConflict> conflicts;
  private final Vertx vertx;
  private final Function<RunnerCall, RunnerProof> prover;

  /**
   * The proof each open connection gave, with the proof header it came with: a connection is one
   * process's, so its later calls need not be proven again while they carry the same header.
   */
  private final Map<HttpConnection, Proved> proved = new ConcurrentHashMap<>();

  private record Proved(String header, RunnerProof.Proven proof) {}

  /**
   * Runner sessions: a runner proven once gets a random secret in the answer (on the connection
   * just proven to be its own), and its later calls, on any connection, carry it instead of being
   * proven again: one proof an attempt, where each new connection would cost the kernel's socket
   * tables a read. By the SHA-256 of the secret; forgotten after {@link #SESSION_KEPT}.
   */
  private final Map<String, Session> sessions = new ConcurrentHashMap<>();

  private record Session(RunnerProof.Proven proof, String stated, long since) {}

  static final Duration SESSION_KEPT = Duration.ofHours(25);

  private final java.security.SecureRandom random = new java.security.SecureRandom();

  /**
   * @param prover who sent a runner call ({@link io.oneshot.launch.Launcher#prove}); may block, and
   *     is called on a worker thread
   */
  RunnerApi(
      Vertx vertx,
      BuildStore store,
      OneshotConfig config,
      Metrics metrics,
      Consumer<RunnerConflict> conflicts,
      Function<RunnerCall, RunnerProof> prover) {
    this.vertx = vertx;
    this.store = store;
    this.config = config;
    this.metrics = metrics;
    this.conflicts = conflicts;
    this.prover = prover;
  }

  /**
   * Reads what became of a Coder job: (coder source, organization, daemon name) to Coder's word, or
   * empty when the daemon took no job.
   */
  @FunctionalInterface
  public interface CoderOutcomes {
    Future<java.util.Optional<io.oneshot.source.CoderOutcome>> of(
        String source, String organization, String daemon);
  }

  /**
   * Where Coder builds' outcomes are read; null: no Coder source, every outcome is the runner's.
   */
  private volatile CoderOutcomes coderOutcomes;

  void coderOutcomes(CoderOutcomes outcomes) {
    this.coderOutcomes = outcomes;
  }

  void mount(Router router) {
    router.post("/api/v1/runner/acquire").handler(this::acquire);
    router.post("/api/v1/runner/heartbeat").handler(this::heartbeat);
    router.post("/api/v1/runner/logs").handler(this::logs);
    router.post("/api/v1/runner/complete").handler(this::complete);
    router.post("/api/v1/runner/took-job").handler(this::tookJob);
  }

  /**
   * A runner of a queue source's build took its job (the coder provisioner's daemon holds one): the
   * build stops counting as in flight for its source, and its timeline says what it took.
   */
  private void tookJob(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    JsonNode body = bodyObject(ctx);
    rejectUnknownFields(body, Set.of("what"));
    String what = textOrNull(body, "what");
    if (what == null || what.isBlank() || what.length() > 500) {
      throw ApiError.badRequest("what", "is required: 1 to 500 characters saying what was taken");
    }
    proven(
        ctx,
        hash,
        "report a job taken",
        (runner, attempt) ->
            store
                .sources()
                .tookJob(hash, runner.id(), what)
                .onSuccess(
                    m -> {
                      if (m.isEmpty()) {
                        refuse(ctx, hash, runner, attempt, "report a job taken");
                      } else {
                        json(ctx, 200, Map.of("marked", m.get()));
                      }
                    })
                .onFailure(ctx::fail));
  }

  static byte[] runnerToken(RoutingContext ctx) {
    String token = bearer(ctx);
    if (token == null || !token.startsWith(BuildToken.PREFIX)) {
      throw unauthorized("missing Authorization: Bearer <build token>");
    }
    return BuildToken.hash(token);
  }

  /**
   * The runner a call comes from, as it names itself in its headers ({@link RunnerHeaders}); a call
   * that names none is refused. What it names proves nothing: {@link #proven} asks the launcher.
   */
  static Runner runner(RoutingContext ctx) {
    return RunnerHeaders.parse(ctx.request().headers()::get);
  }

  /**
   * Proves who sent a runner call ({@link io.oneshot.launch.Launcher#prove}, on a worker thread,
   * once per connection and proof header), then runs {@code then} on the event loop with the proven
   * runner and the attempt it was started for (null only from a test's launcher). A call nothing
   * proves is refused with 401, runs nothing, and is a WARN and a line in its token's build: a
   * token alone never runs a build.
   */
  void proven(RoutingContext ctx, byte[] hash, String call, BiConsumer<Runner, AttemptRef> then) {
    Runner stated = runner(ctx);
    HttpConnection connection = ctx.request().connection();
    String header = ctx.request().getHeader(RunnerHeaders.PROOF);
    // With the runner as it names itself: one connection is one process's, whose name does not
    // change (a test's launcher takes runners at their word, and runners in one JVM share
    // connections).
    String key =
        (header == null ? "" : BuildToken.hex(BuildToken.hash(header))) + "|" + stated.id();
    Proved known = proved.get(connection);
    if (known != null && known.header().equals(key)) {
      run(ctx, then, known.proof());
      return;
    }
    String session = ctx.request().getHeader(RunnerHeaders.SESSION);
    if (session != null) {
      Session s = sessions.get(BuildToken.hex(BuildToken.hash(session)));
      if (s != null
          && s.stated().equals(stated.id())
          && System.nanoTime() - s.since() < SESSION_KEPT.toNanos()) {
        run(ctx, then, s.proof());
        return;
      }
    }
    SocketAddress remote = ctx.request().remoteAddress();
    SocketAddress local = ctx.request().localAddress();
    RunnerCall rc =
        new RunnerCall(
            remote == null ? null : remote.hostAddress(),
            remote == null ? -1 : remote.port(),
            local == null ? -1 : local.port(),
            header,
            stated);
    vertx
        .executeBlocking(() -> prover.apply(rc), false)
        .onComplete(
            ar -> {
              if (ar.failed()) {
                log.warn(
                    "Cannot prove who sent a runner call ({}): {}.", call, ar.cause().toString());
                fail(
                    ctx,
                    new ApiError(
                        503,
                        "cannot prove who sent this call now: " + ar.cause().getMessage(),
                        "try again",
                        null));
                return;
              }
              switch (ar.result()) {
                case RunnerProof.Proven p -> {
                  if (proved.put(connection, new Proved(key, p)) == null) {
                    connection.closeHandler(x -> proved.remove(connection));
                  }
                  ctx.response().putHeader(RunnerHeaders.SESSION, newSession(p, stated));
                  run(ctx, then, p);
                }
                case RunnerProof.Vanished v -> {
                  // Nobody waits for this answer: not a caller to refuse, nor a line to write.
                  log.debug("A runner call's connection closed before it was proven: {}.", v.why());
                  fail(ctx, new ApiError(503, "try again: " + v.why(), null, null));
                }
                case RunnerProof.Unproven u -> unproven(ctx, hash, stated, call, u.why());
              }
            });
  }

  /** A session for a runner just proven, and its secret (sent to it alone). */
  private String newSession(RunnerProof.Proven p, Runner stated) {
    byte[] b = new byte[32];
    random.nextBytes(b);
    String secret = java.util.Base64.getUrlEncoder().withoutPadding().encodeToString(b);
    long now = System.nanoTime();
    if (sessions.size() > 100_000) {
      sessions.values().removeIf(v -> now - v.since() >= SESSION_KEPT.toNanos());
    }
    sessions.put(BuildToken.hex(BuildToken.hash(secret)), new Session(p, stated.id(), now));
    return secret;
  }

  private static void run(
      RoutingContext ctx, BiConsumer<Runner, AttemptRef> then, RunnerProof.Proven p) {
    try {
      then.accept(p.runner(), p.attempt());
    } catch (RuntimeException e) {
      ctx.fail(e);
    }
  }

  /**
   * A call with a token that nothing proves came from its attempt's runner: 401, a WARN, a line in
   * the build's log and timeline, an audit entry.
   */
  private void unproven(RoutingContext ctx, byte[] hash, Runner stated, String call, String why) {
    ApiError refusal =
        new ApiError(
            401,
            "this call is not from the runner the dispatcher started for this token's attempt: "
                + why,
            "a build token runs nothing by itself: only the process or pod oneshot launched with it"
                + " may use it",
            null);
    store
        .runner()
        .tokenState(hash)
        .onSuccess(
            st -> {
              if (st.isEmpty()) {
                fail(ctx, unauthorized("this token belongs to no current attempt"));
                return;
              }
              RunnerStore.TokenState t = st.get();
              log.warn(
                  "Build {} (route {}, attempt {}): a call to {} with its token was refused: {}.",
                  t.id(),
                  t.route(),
                  t.attempt(),
                  call,
                  why);
              metrics.runnerUnproven(t.route());
              audit(stated, call, t.id(), t.route(), "unproven", why);
              if (t.status().terminal()) {
                fail(ctx, refusal);
                return;
              }
              store
                  .runner()
                  .recordConflict(
                      t.id(),
                      t.attempt(),
                      "a call with this attempt's token was refused: someone tried to "
                          + call
                          + ", and "
                          + why
                          + "; it runs nothing")
                  .onComplete(x -> fail(ctx, refusal));
            })
        .onFailure(ctx::fail);
  }

  /** A runner call in the audit trail: the runner by its fingerprint and what proved it. */
  void audit(Runner runner, String call, long buildId, String route, String outcome, String why) {
    com.fasterxml.jackson.databind.node.ObjectNode detail = Json.MAPPER.createObjectNode();
    runner.details().forEach((k, v) -> detail.put(k, String.valueOf(v)));
    if (why != null) {
      detail.put("why", why);
    }
    store
        .audit()
        .append(
            AuditStore.Entry.of(
                    "runner:" + runner.fingerprint(),
                    "runner-" + call.replace(' ', '-'),
                    buildId,
                    route)
                .withOutcome(outcome)
                .withDetail(detail))
        .onFailure(
            e -> log.warn("Cannot write the audit entry of a runner call: {}.", e.toString()));
  }

  private void acquire(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    Http.emptyBody(ctx);
    proven(
        ctx,
        hash,
        "acquire",
        (runner, attempt) ->
            store
                .runner()
                .acquire(hash, runner, attempt)
                .onSuccess(
                    a -> {
                      switch (a) {
                        case RunnerStore.Acquire.Granted g -> granted(ctx, g.build(), runner);
                        case RunnerStore.Acquire.HeldByOther h ->
                            conflict(ctx, h.holder(), runner, "acquire");
                        case RunnerStore.Acquire.NoAttempt n ->
                            refuse(ctx, hash, runner, attempt, "acquire");
                        case RunnerStore.Acquire.Unsealable u -> unsealable(ctx, hash, runner, u);
                      }
                    })
                .onFailure(ctx::fail));
  }

  /**
   * An attempt whose sealed values do not open here cannot run: it fails at once with why (a key
   * missing from encryption.keys), rather than hang until the rescuer calls it hung; the runner is
   * told the attempt is over (410) and exits.
   */
  private void unsealable(
      RoutingContext ctx, byte[] hash, Runner runner, RunnerStore.Acquire.Unsealable u) {
    String error = "cannot decrypt what the build needs: " + u.why();
    log.error("Build {} (route {}, attempt {}): {}.", u.buildId(), u.route(), u.attempt(), error);
    store
        .runner()
        .complete(
            hash,
            runner.id(),
            new RunnerStore.Completion(
                io.oneshot.build.BuildState.FAILED, null, error, null, error, null))
        .onComplete(
            x -> {
              if (x.succeeded() && x.result().isPresent()) {
                metrics.finished(u.route(), "failed", null);
              }
              fail(
                  ctx,
                  new ApiError(
                      410,
                      "build " + u.buildId() + " failed: " + error,
                      "see encryption.keys in the dispatcher's configuration",
                      null));
            });
  }

  private void granted(RoutingContext ctx, RunnerStore.Acquired b, Runner runner) {
    if (b.first()) {
      if (b.startSeconds() != null) {
        metrics.acquired(b.route(), b.startSeconds());
      }
      log.info(
          "Build {} (route {}, attempt {}): acquired by provisionerd, {}.",
          b.id(),
          b.route(),
          b.attempt(),
          runner.describe());
      audit(runner, "acquire", b.id(), b.route(), "ok", null);
    }
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("buildId", b.id());
    body.put("attempt", b.attempt());
    body.put("route", b.route());
    body.put("workspace", b.workspace());
    body.put("input", b.input());
    body.put("timeoutMs", b.timeoutMs());
    body.put("cancelGraceMs", b.cancelGraceMs());
    body.put("heartbeatIntervalMs", config.dispatch().heartbeatInterval().toMillis());
    body.put("leaseMs", lease(b.route()).toMillis());
    body.put("maxLogLineBytes", config.limits().maxLogLineBytes());
    body.put("cancelRequested", b.cancelRequested());
    body.put("stateVersion", b.stateVersion());
    body.put("state", b.state());
    json(ctx, 200, body);
  }

  /** The route's runner lease; a route the configuration no longer has gets the default. */
  private Duration lease(String route) {
    return config
        .route(route)
        .map(OneshotConfig.Route::lease)
        .orElse(io.oneshot.config.ConfigLoader.DEFAULT_LEASE);
  }

  /**
   * A call from a runner other than the one the attempt is bound to: refused with 409, and made
   * visible: a line in the build's log and timeline, a WARN, a metric, and the launcher told, so
   * that it removes the second runner's pod or process when it is its own.
   */
  private void conflict(RoutingContext ctx, RunnerStore.Holder holder, Runner caller, String call) {
    String line =
        "a second runner was refused: "
            + caller.describe()
            + " tried to "
            + call
            + ", but "
            + holder.describe()
            + "; it runs nothing and exits";
    log.warn(
        "Build {} (route {}, attempt {}): {} tried to {}; the attempt is held by {}. Refused.",
        holder.buildId(),
        holder.route(),
        holder.attempt(),
        caller.describe(),
        call,
        holder.runner().describe());
    metrics.runnerConflict(holder.route());
    audit(caller, call, holder.buildId(), holder.route(), "conflict", holder.describe());
    conflicts.accept(new RunnerConflict(holder, caller));
    Map<String, Object> body =
        errorBody(holder.describe(), "this runner must not run the build", null);
    Map<String, Object> h = new LinkedHashMap<>();
    h.put("runner", holder.runner().fingerprint());
    h.putAll(holder.runner().details());
    h.put("since", holder.since());
    body.put("holder", h);
    store
        .runner()
        .recordConflict(holder.buildId(), holder.attempt(), line)
        .onComplete(x -> json(ctx, 409, body));
  }

  private void heartbeat(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    Http.emptyBody(ctx);
    proven(
        ctx,
        hash,
        "heartbeat",
        (runner, attempt) ->
            store
                .runner()
                .heartbeat(hash, runner.id())
                .onSuccess(
                    c -> {
                      if (c.isEmpty()) {
                        refuse(ctx, hash, runner, attempt, "heartbeat");
                      } else {
                        json(ctx, 200, Map.of("cancelRequested", c.get()));
                      }
                    })
                .onFailure(ctx::fail));
  }

  private void logs(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    // A NUL in a line's text (a binary printed by a build) is stored as U+FFFD rather than refused;
    // anywhere else it is a 400.
    JsonNode body = bodyObject(ctx, path -> LOG_TEXT.matcher(path).matches());
    JsonNode first = body.path("first");
    if (!first.canConvertToLong()
        || !first.isIntegralNumber()
        || first.longValue() < 1
        || first.longValue() > MAX_LINE_NUMBER) {
      throw ApiError.badRequest(
          "first",
          "must be the runner's number of the batch's first line, from 1 to " + MAX_LINE_NUMBER);
    }
    JsonNode lines = body.path("lines");
    if (!lines.isArray()) {
      throw ApiError.badRequest("lines", "must be an array of log lines");
    }
    if (lines.size() > MAX_LINES_PER_BATCH) {
      throw ApiError.badRequest("lines", "at most " + MAX_LINES_PER_BATCH + " lines per batch");
    }
    List<RunnerStore.NewLine> parsed = new ArrayList<>(lines.size());
    int[] cut = {0};
    for (int i = 0; i < lines.size(); i++) {
      parsed.add(parseLine(lines.get(i), "lines[" + i + "]", cut));
    }
    proven(
        ctx,
        hash,
        "send logs",
        (runner, attempt) -> logs(ctx, hash, runner, attempt, first.longValue(), parsed, cut[0]));
  }

  private void logs(
      RoutingContext ctx,
      byte[] hash,
      Runner runner,
      AttemptRef attempt,
      long first,
      List<RunnerStore.NewLine> parsed,
      int cutLines) {
    store
        .runner()
        .appendLogs(hash, runner.id(), first, parsed, config.limits().maxLogBytes())
        .onSuccess(
            ack -> {
              if (ack.isEmpty()) {
                refuse(ctx, hash, runner, attempt, "send logs");
                return;
              }
              RunnerStore.LogAck a = ack.get();
              int dropped = a.fresh() - a.accepted();
              if (dropped > 0) {
                metrics.logLinesDropped(dropped);
              }
              // Lines of a batch sent again were counted the first time.
              if (a.fresh() > 0 && cutLines > 0) {
                metrics.logLinesCut(cutLines);
              }
              Future<Void> note = Future.succeededFuture();
              if (dropped > 0 && a.bytesBefore() <= config.limits().maxLogBytes()) {
                note =
                    store
                        .attempts()
                        .systemLog(
                            a.buildId(),
                            a.attempt(),
                            "warn",
                            "log truncated: this build's log reached its limit of "
                                + Units.formatSize(config.limits().maxLogBytes())
                                + " (limits.maxLogBytes); later output is dropped, the build goes"
                                + " on")
                        .mapEmpty();
              }
              note.onComplete(
                  x ->
                      json(
                          ctx,
                          200,
                          Map.of(
                              "cancelRequested", a.cancelRequested(), "accepted", a.accepted())));
            })
        .onFailure(ctx::fail);
  }

  /**
   * The highest line number a batch may start at: 2^53 - 1, the largest integer every JSON client
   * holds exactly, far below where the line numbers' bigint would overflow.
   */
  static final long MAX_LINE_NUMBER = (1L << 53) - 1;

  private static final java.util.regex.Pattern LOG_TEXT =
      java.util.regex.Pattern.compile("lines\\[[0-9]+]\\.text");

  /** One line of a batch; {@code cut[0]} counts the lines cut to the line limit. */
  private RunnerStore.NewLine parseLine(JsonNode n, String path, int[] cut) {
    if (!n.isObject()) {
      throw ApiError.badRequest(path, "must be an object {ts, stream, level, stage, text}");
    }
    for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!LINE_FIELDS.contains(f)) {
        throw ApiError.badRequest(path + "." + f, "unknown field");
      }
    }
    JsonNode text = n.path("text");
    if (!text.isTextual()) {
      throw ApiError.badRequest(path + ".text", "must be a string");
    }
    String stream = n.path("stream").asText("stdout");
    if (!STREAMS.contains(stream)) {
      throw ApiError.badRequest(path + ".stream", "must be stdout, stderr or system");
    }
    Instant ts;
    try {
      ts = n.hasNonNull("ts") ? Instant.parse(n.get("ts").asText()) : Instant.now();
    } catch (RuntimeException e) {
      throw ApiError.badRequest(path + ".ts", "must be an RFC 3339 time");
    }
    JsonNode milestone = n.path("milestone");
    if (!milestone.isMissingNode() && !milestone.isBoolean()) {
      throw ApiError.badRequest(path + ".milestone", "must be true or false");
    }
    String clean = text.asText().replace(Http.NUL, '\uFFFD');
    String kept = truncate(clean, config.limits().maxLogLineBytes());
    if (kept != clean) {
      cut[0]++;
    }
    return new RunnerStore.NewLine(
        ts,
        stream,
        textOrNull(n, "level", path + ".level"),
        textOrNull(n, "stage", path + ".stage"),
        kept,
        milestone.asBoolean(false));
  }

  private void complete(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    JsonNode body = bodyObject(ctx);
    rejectUnknownFields(body, Set.of("outcome", "exitCode", "error", "outputs", "state", "usage"));
    BuildState outcome;
    try {
      outcome = BuildState.ofWire(body.path("outcome").asText());
    } catch (IllegalArgumentException e) {
      outcome = null;
    }
    if (outcome == null || !outcome.terminal()) {
      throw ApiError.badRequest("outcome", "must be succeeded, failed or canceled");
    }
    Long code = Http.longOrNull(body, "exitCode", Integer.MIN_VALUE, Integer.MAX_VALUE);
    Integer exitCode = code == null ? null : code.intValue();
    String error = textOrNull(body, "error");
    if (error != null && error.length() > 4096) {
      error = error.substring(0, 4096) + "…";
    }
    JsonNode outputs = body.hasNonNull("outputs") ? body.get("outputs") : null;
    if (outputs != null && !outputs.isObject()) {
      throw ApiError.badRequest("outputs", "must be an object of output name to value");
    }
    StateStore.StateUpload state =
        body.hasNonNull("state")
            ? WorkspaceStateApi.upload(body.get("state"), "state", config.limits().maxStateBytes())
            : null;
    String reason =
        switch (outcome) {
          case SUCCEEDED -> "provisionerd reported success";
          case CANCELED -> error == null ? "canceled" : error;
          default -> error == null ? "provisionerd reported failure" : error;
        };
    RunnerStore.Completion completion =
        new RunnerStore.Completion(outcome, exitCode, error, outputs, reason, state, usage(body));
    proven(
        ctx,
        hash,
        "complete",
        (runner, attempt) -> complete(ctx, hash, runner, attempt, completion));
  }

  /**
   * A Coder build ends as its Coder job did, read from Coder's tables, whatever the daemon's exit
   * (it exits 0 after a signal however its job went); a Coder database that cannot be read answers
   * 503, which provisionerd tries again. Any other build ends as its runner says.
   */
  private void complete(
      RoutingContext ctx,
      byte[] hash,
      Runner runner,
      AttemptRef attempt,
      RunnerStore.Completion completion) {
    CoderOutcomes coder = coderOutcomes;
    if (coder == null) {
      write(ctx, hash, runner, attempt, completion);
      return;
    }
    store
        .runner()
        .coderBuild(hash, runner.id())
        .compose(
            b -> {
              if (b.isEmpty()) {
                return Future.succeededFuture(completion);
              }
              RunnerStore.CoderBuild cb = b.get();
              String daemon = io.oneshot.source.CoderOutcome.daemonName(cb.id(), cb.attempt());
              return coder
                  .of(cb.source(), cb.organization(), daemon)
                  .compose(
                      o -> {
                        if (o.isEmpty()) {
                          return Future.succeededFuture(completion);
                        }
                        return takenByCodersWord(hash, runner, o.get())
                            .map(x -> asCoderSays(completion, o.get()));
                      });
            })
        .onSuccess(c -> write(ctx, hash, runner, attempt, c))
        .onFailure(
            e -> {
              log.warn(
                  "Build {}: cannot read its Coder job's outcome from Coder's database: {}. The"
                      + " runner tries again.",
                  attempt.buildId(),
                  e.getMessage());
              fail(
                  ctx,
                  new ApiError(
                      503,
                      "try again: cannot read the Coder job's outcome from Coder's database: "
                          + e.getMessage(),
                      null,
                      null));
            });
  }

  /**
   * Coder's tables say the daemon took a job: the build no longer counts for its tag set, whether
   * or not its own report of it got through (a dispatcher that died as it came, say). Marked once.
   */
  private Future<?> takenByCodersWord(
      byte[] hash, Runner runner, io.oneshot.source.CoderOutcome o) {
    return store
        .sources()
        .tookJob(hash, runner.id(), "took Coder job " + o.job() + ", as Coder's tables say");
  }

  /**
   * The completion with the Coder job's outcome and Coder's words as its reason and error. A build
   * its runner stopped for a cancel asked of oneshot stays canceled: the daemon cancels its job on
   * SIGINT and reports the provision's error, so Coder records it failed, without canceled_at.
   */
  private static RunnerStore.Completion asCoderSays(
      RunnerStore.Completion c, io.oneshot.source.CoderOutcome o) {
    BuildState outcome =
        c.outcome() == BuildState.CANCELED && o.outcome() == BuildState.FAILED
            ? BuildState.CANCELED
            : o.outcome();
    String reason =
        outcome == o.outcome()
            ? o.reason()
            : (c.reason() == null ? "canceled" : c.reason()) + "; " + o.reason();
    return new RunnerStore.Completion(
        outcome,
        c.exitCode(),
        outcome == BuildState.SUCCEEDED ? null : reason,
        c.outputs(),
        reason,
        c.state(),
        c.usage());
  }

  /**
   * What the build met of its pod's limits, as provisionerd read its cgroups (null when it sent
   * nothing): {@code oomKills}, {@code memoryLimitBytes}, {@code cpuThrottledSeconds}, {@code
   * cpuLimitCores}, each a number in its range; anything else is a 400.
   */
  static JsonNode usage(JsonNode body) {
    JsonNode u = body.path("usage");
    if (u.isMissingNode() || u.isNull()) {
      return null;
    }
    if (!u.isObject()) {
      throw ApiError.badRequest("usage", "must be an object");
    }
    rejectUnknownFields(
        u,
        Set.of("oomKills", "memoryLimitBytes", "cpuThrottledSeconds", "cpuLimitCores"),
        "usage.");
    com.fasterxml.jackson.databind.node.ObjectNode out = Json.MAPPER.createObjectNode();
    Long kills = Http.longOrNull(u, "oomKills", 0, Integer.MAX_VALUE, "usage.oomKills");
    Long limit =
        Http.longOrNull(u, "memoryLimitBytes", 0, Long.MAX_VALUE, "usage.memoryLimitBytes");
    Double throttled = number(u, "cpuThrottledSeconds", 1e9);
    Double cores = number(u, "cpuLimitCores", 1e6);
    if (kills != null) {
      out.put("oomKills", kills);
    }
    if (limit != null) {
      out.put("memoryLimitBytes", limit);
    }
    if (throttled != null) {
      out.put("cpuThrottledSeconds", throttled);
    }
    if (cores != null) {
      out.put("cpuLimitCores", cores);
    }
    return out;
  }

  private static Double number(JsonNode u, String field, double max) {
    JsonNode n = u.path(field);
    if (n.isMissingNode() || n.isNull()) {
      return null;
    }
    if (!n.isNumber()
        || !Double.isFinite(n.doubleValue())
        || n.doubleValue() < 0
        || n.doubleValue() > max) {
      throw ApiError.badRequest("usage." + field, "must be a number from 0 to " + (long) max);
    }
    return n.doubleValue();
  }

  private void write(
      RoutingContext ctx,
      byte[] hash,
      Runner runner,
      AttemptRef attempt,
      RunnerStore.Completion completion) {
    BuildState finalOutcome = completion.outcome();
    Integer exitCode = completion.exitCode();
    store
        .runner()
        .complete(hash, runner.id(), completion)
        .onSuccess(
            s -> {
              if (s.isEmpty()) {
                refuse(ctx, hash, runner, attempt, "complete");
                return;
              }
              RunnerStore.Completed done = s.get();
              audit(runner, "complete", done.id(), done.route(), "ok", finalOutcome.wire());
              metrics.finished(done.route(), done.status().wire(), done.ranSeconds());
              if (completion.usage() != null
                  && completion.usage().path("cpuThrottledSeconds").asDouble() > 0) {
                metrics.cpuThrottled(
                    done.route(), completion.usage().path("cpuThrottledSeconds").asDouble());
              }
              log.info(
                  "Build {} (route {}, attempt {}): {} (exit code {}).",
                  done.id(),
                  done.route(),
                  done.attempt(),
                  finalOutcome.wire(),
                  exitCode);
              Future<?> note = Future.succeededFuture();
              if (done.stateRefused() != null) {
                log.warn(
                    "Build {}: its final state was refused: {}.", done.id(), done.stateRefused());
                note =
                    store
                        .attempts()
                        .systemLog(
                            done.id(),
                            done.attempt(),
                            "warn",
                            "the final terraform state was not stored: " + done.stateRefused());
              }
              note.onComplete(x -> json(ctx, 200, Map.of("status", done.status().wire())));
            })
        .onFailure(ctx::fail);
  }

  /**
   * Says why a runner call found no running attempt of its runner for its token. A repeated {@code
   * complete} by the bound runner for a build that already ended is answered as a success, so that
   * a retry after a lost reply ends provisionerd cleanly; from any other runner it is a conflict.
   */
  void refuse(RoutingContext ctx, byte[] hash, Runner caller, AttemptRef proven, String call) {
    store
        .runner()
        .tokenState(hash)
        .onSuccess(
            st -> {
              if (st.isEmpty()) {
                fail(ctx, unauthorized("this token belongs to no current attempt"));
                return;
              }
              RunnerStore.TokenState t = st.get();
              if (proven != null
                  && (proven.buildId() != t.id() || proven.attempt() != t.attempt())) {
                unproven(
                    ctx,
                    hash,
                    caller,
                    call,
                    caller.describe()
                        + " was started for attempt "
                        + proven.name()
                        + ", not for this token's");
                return;
              }
              RunnerStore.Holder holder = t.holder();
              boolean other = holder != null && !holder.runner().id().equals(caller.id());
              if (t.status().terminal()) {
                if (other) {
                  conflict(ctx, holder, caller, call);
                } else if (call.equals("complete")) {
                  json(ctx, 200, Map.of("status", t.status().wire()));
                } else {
                  fail(
                      ctx,
                      new ApiError(
                          410,
                          "build " + t.id() + " has ended: " + t.status().wire(),
                          "this attempt should stop and exit",
                          null));
                }
                return;
              }
              if (other) {
                conflict(ctx, holder, caller, call);
                return;
              }
              fail(
                  ctx,
                  new ApiError(
                      409,
                      "build "
                          + t.id()
                          + (t.status().terminal() ? " already " : " is ")
                          + t.status().wire(),
                      call.equals("acquire")
                          ? null
                          : t.status() == BuildState.RUNNING
                              ? "build " + t.id() + " has no workspace to save state for"
                              : "acquire the build first",
                      null));
            })
        .onFailure(ctx::fail);
  }

  /**
   * Cuts a line to at most {@code maxBytes} of UTF-8, on a character boundary; a line that fits is
   * returned as the same instance (parseLine counts the cut ones by that).
   */
  static String truncate(String text, int maxBytes) {
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    if (b.length <= maxBytes) {
      return text;
    }
    String marker = " …[truncated]";
    int limit = maxBytes - marker.getBytes(StandardCharsets.UTF_8).length;
    int end = Math.max(0, limit);
    while (end > 0 && (b[end] & 0xC0) == 0x80) {
      end--;
    }
    return new String(b, 0, end, StandardCharsets.UTF_8) + marker;
  }
}
