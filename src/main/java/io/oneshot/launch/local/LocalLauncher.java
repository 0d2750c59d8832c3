package io.oneshot.launch.local;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import io.oneshot.build.Runner;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import io.oneshot.launch.RunnerCall;
import io.oneshot.launch.RunnerProof;
import io.oneshot.process.PortOwner;
import io.oneshot.process.Signals;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs each attempt as its own {@code oneshot provisionerd} process, in a fresh directory under
 * {@code runDir/<attempt name>/} that holds the token file (mode 0600, read and deleted by
 * provisionerd), the work directory, provisionerd's own diagnostics ({@code provisionerd.log}) and
 * {@code attempt.json} (pid and start time, so that a restarted dispatcher can find the process
 * again). The process gets a reduced environment and, where {@code setsid} exists, its own process
 * group, so that a kill also takes whatever the build started.
 */
public final class LocalLauncher implements Launcher {
  private static final Logger log = LoggerFactory.getLogger(LocalLauncher.class);

  private static final String ATTEMPT_FILE = "attempt.json";
  private static final String TOKEN_FILE = "token";
  private static final String LOG_FILE = "provisionerd.log";

  private final Path runDir;

  /** On the command line of every provisionerd: {@code -Doneshot.attempt=<attempt dir>}. */
  static final String MARKER = "-Doneshot.attempt=";

  /** The provisionerd command, and the class data sharing archive its processes share. */
  private final SharedArchive.Command command;

  private final Map<String, String> baseEnv;
  private final String setsid;

  /** Where each attempt runs isolated; null: plain processes. */
  private final Sandbox sandbox;

  private final ConcurrentMap<String, Proc> procs = new ConcurrentHashMap<>();
  private final ScheduledExecutorService timers;
  private final PortOwner ports = new PortOwner();

  /** The API carried into attempts with no network of their own; null when they have the host's. */
  private final ApiRelay relay;

  private volatile AttemptEvents events = AttemptEvents.NONE;

  /** A process this launcher started or found again; {@code process} is null for the latter. */
  private record Proc(AttemptRef ref, ProcessHandle handle, Process process, Path dir) {}

  /**
   * @param runDir where attempt directories go; created if missing
   * @param command the provisionerd command line (see {@link LocalCommand#defaultCommand}); its
   *     class data sharing archive flags, if it has them, are given out by a {@link SharedArchive}
   * @param baseEnv the environment every attempt gets, before oneshot's own variables
   */
  public LocalLauncher(Path runDir, List<String> command, Map<String, String> baseEnv) {
    this(runDir, command, baseEnv, Optional.empty());
  }

  /**
   * @param sandbox where each attempt runs isolated ({@link Sandbox}); empty: plain processes
   */
  public LocalLauncher(
      Path runDir, List<String> command, Map<String, String> baseEnv, Optional<Sandbox> sandbox) {
    this.runDir = runDir.toAbsolutePath();
    this.command = SharedArchive.takeOver(command);
    this.baseEnv = Map.copyOf(baseEnv);
    this.setsid = LocalCommand.findSetsid();
    this.sandbox = sandbox.orElse(null);
    this.relay = this.sandbox != null ? new ApiRelay() : null;
    this.timers =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "oneshot-local-launcher");
              t.setDaemon(true);
              return t;
            });
    try {
      Files.createDirectories(this.runDir);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot create the run directory " + this.runDir, e);
    }
    if (this.sandbox != null) {
      writeArchiveOutside();
    }
  }

  /**
   * With a sandbox, attempts never write the class data sharing archive (a build could doctor it
   * for the next provisionerd): one warm-up build of this launcher's own ({@code provisionerd
   * --warm-up}, a fixed script against an API of its own) writes it, outside any sandbox.
   */
  private void writeArchiveOutside() {
    SharedArchive archive = command.archive();
    if (archive == null || archive.reader() != null) {
      return;
    }
    SharedArchive.Use writer = archive.next();
    List<String> cmd = new ArrayList<>(command.with(writer));
    cmd.add("--warm-up");
    ProcessBuilder pb = new ProcessBuilder(cmd).directory(runDir.toFile());
    pb.environment().clear();
    pb.environment().putAll(baseEnv);
    pb.redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
    pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
    pb.redirectError(ProcessBuilder.Redirect.DISCARD);
    try {
      archive.watch(writer, pb.start());
    } catch (IOException e) {
      log.warn("Cannot write the class data sharing archive {}: {}.", archive.file(), e.toString());
      archive.exited(writer, -1);
    }
  }

  @Override
  public String kind() {
    return "local";
  }

  @Override
  public void events(AttemptEvents events) {
    this.events = events;
  }

  @Override
  public LaunchOutcome launch(Attempt a) {
    String name = a.name();
    Proc known = procs.get(name);
    if (known != null) {
      return new LaunchOutcome.AlreadyLaunched(null, "process " + known.handle().pid());
    }
    Path dir = runDir.resolve(name);
    if (Files.exists(dir.resolve(ATTEMPT_FILE))) {
      Optional<Proc> found = find(a.ref(), dir);
      return new LaunchOutcome.AlreadyLaunched(
          null, found.map(p -> "process " + p.handle().pid()).orElse("process already ended"));
    }
    try {
      createPrivateDirectory(dir);
      Path work = Files.createDirectories(dir.resolve("work"));
      Path tmp = Files.createDirectories(dir.resolve("tmp"));
      Path tokenFile = dir.resolve(TOKEN_FILE);
      Files.deleteIfExists(tokenFile);
      Files.createFile(
          tokenFile,
          PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
      Files.writeString(tokenFile, a.token().value(), StandardCharsets.UTF_8);

      SharedArchive.Use use =
          sandbox == null
              ? command.next()
              : command.archive() == null ? null : command.archive().reader();
      List<String> own = command.with(use);
      List<String> cmd = new ArrayList<>();
      if (setsid != null) {
        cmd.add(setsid);
      }
      cmd.add(own.get(0));
      if (Path.of(own.get(0)).getFileName().toString().equals("java")) {
        // Names the attempt on the process's command line: a dispatcher that died between
        // starting the process and recording its pid can still be found (see byMarker).
        cmd.add(MARKER + dir.toAbsolutePath());
      }
      cmd.addAll(own.subList(1, own.size()));
      ProcessBuilder pb = new ProcessBuilder().directory(work.toFile());
      Map<String, String> env = pb.environment();
      env.clear();
      env.putAll(baseEnv);
      // What the attempt's route alone names (its own Coder key, say): no other route's builds.
      for (String variable : a.route().passEnv()) {
        String v = System.getenv(variable);
        if (v != null) {
          env.put(variable, v);
        }
      }
      env.put("HOME", work.toString());
      env.put("TMPDIR", tmp.toString());
      env.put("ONESHOT_API_URL", a.apiUrl());
      env.put("ONESHOT_TOKEN_FILE", tokenFile.toString());
      env.put("ONESHOT_WORK_DIR", work.toString());
      env.put("ONESHOT_BUILD_ID", Long.toString(a.buildId()));
      env.put("ONESHOT_ATTEMPT", Integer.toString(a.attempt()));
      boolean ownNet = sandbox != null && sandbox.ownNetwork(a.route().network());
      if (ownNet) {
        relay.listen(a.ref(), dir, a.apiUrl());
        env.put("ONESHOT_API_SOCKET", dir.resolve(ApiRelay.SOCKET).toString());
      }
      if (sandbox != null) {
        List<String> inner = cmd.subList(setsid == null ? 0 : 1, cmd.size());
        List<String> wrapped =
            sandbox.wrap(
                new ArrayList<>(inner),
                dir,
                env,
                use == null ? List.of() : List.of(command.archive().file()),
                ownNet);
        cmd = new ArrayList<>(cmd.subList(0, setsid == null ? 0 : 1));
        cmd.addAll(wrapped);
      }
      pb.command(cmd);
      pb.redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
      pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
      pb.redirectError(dir.resolve(LOG_FILE).toFile());
      Process process = pb.start();
      if (use != null) {
        command.archive().watch(use, process);
      }
      ProcessHandle handle = process.toHandle();
      writeAttemptFile(dir, a, handle);
      Proc proc = new Proc(a.ref(), handle, process, dir);
      procs.put(name, proc);
      process.onExit().thenRun(() -> ended(proc));
      events.runsIn(a.ref(), "process " + handle.pid());
      log.debug("Build {}: started attempt {} as process {}.", a.buildId(), name, handle.pid());
      return new LaunchOutcome.Launched(null, "process " + handle.pid());
    } catch (IOException e) {
      if (relay != null) {
        relay.forget(a.ref());
      }
      deleteQuietly(dir);
      String msg =
          "cannot start provisionerd (" + command.command().get(0) + "): " + e.getMessage();
      if (e.getMessage() != null && e.getMessage().contains("error=2,")) {
        return new LaunchOutcome.Rejected(msg);
      }
      return new LaunchOutcome.RetryLater(Duration.ofSeconds(2), msg);
    }
  }

  private void ended(Proc proc) {
    int code = proc.process().exitValue();
    // Whatever the build started and left behind in the attempt's process group goes too.
    signalGroup(proc.handle().pid(), proc.ref());
    log.debug("Build {}: attempt {} exited with code {}.", proc.ref().buildId(), proc.ref(), code);
    if (relay != null) {
      relay.forget(proc.ref());
    }
    if (code == 0) {
      // provisionerd exits 0 only after its outcome was acknowledged: nothing left to look at.
      procs.remove(proc.ref().name(), proc);
      deleteQuietly(proc.dir());
    }
    events.changed(proc.ref());
  }

  @Override
  public AttemptState inspect(AttemptRef ref) {
    Proc proc = procs.get(ref.name());
    if (proc == null) {
      Path dir = runDir.resolve(ref.name());
      if (!Files.exists(dir.resolve(ATTEMPT_FILE)) && !recordMarked(ref, dir)) {
        return new AttemptState.Missing("no process for attempt " + ref.name());
      }
      Optional<Proc> found = find(ref, dir);
      if (found.isEmpty()) {
        return new AttemptState.Missing(
            "process of attempt " + ref.name() + " ended while the dispatcher was away");
      }
      proc = found.get();
    }
    if (proc.handle().isAlive()) {
      return new AttemptState.Running("process " + proc.handle().pid());
    }
    if (proc.process() == null) {
      return new AttemptState.Missing("process " + proc.handle().pid() + " ended");
    }
    int code = proc.process().exitValue();
    String tail = tail(proc.dir().resolve(LOG_FILE), 5);
    return new AttemptState.Exited(
        code,
        "process "
            + proc.handle().pid()
            + " exited with code "
            + code
            + (tail.isEmpty() ? "" : ": " + tail));
  }

  /** Finds the process of an attempt started by an earlier dispatcher, by pid and start time. */
  private Optional<Proc> find(AttemptRef ref, Path dir) {
    try {
      JsonNode info = Json.MAPPER.readTree(dir.resolve(ATTEMPT_FILE).toFile());
      long pid = info.path("pid").asLong();
      String start = info.path("start").asText(null);
      Optional<ProcessHandle> handle =
          ProcessHandle.of(pid)
              .filter(ProcessHandle::isAlive)
              .filter(
                  h ->
                      start == null
                          || h.info()
                              .startInstant()
                              .map(Instant::toString)
                              .orElse("")
                              .equals(start));
      if (handle.isEmpty()) {
        return Optional.empty();
      }
      Proc proc = new Proc(ref, handle.get(), null, dir);
      Proc prior = procs.putIfAbsent(ref.name(), proc);
      if (prior == null) {
        // Its relay went with the dispatcher that started it: listen on its socket again.
        String api = info.path("api").asText(null);
        if (relay != null && api != null) {
          try {
            relay.listen(ref, dir, api);
          } catch (IOException e) {
            log.warn("Attempt {}: cannot carry the API to it again: {}.", ref, e.toString());
          }
        }
        handle
            .get()
            .onExit()
            .thenRun(
                () -> {
                  if (relay != null) {
                    relay.forget(ref);
                  }
                  events.changed(ref);
                });
        return Optional.of(proc);
      }
      return Optional.of(prior);
    } catch (IOException e) {
      log.warn("Attempt {}: cannot read {}: {}.", ref, dir.resolve(ATTEMPT_FILE), e.getMessage());
      return Optional.empty();
    }
  }

  @Override
  public void kill(AttemptRef ref, Duration grace, String reason) {
    Path dir = runDir.resolve(ref.name());
    Proc proc = procs.get(ref.name());
    if (proc == null && (Files.exists(dir.resolve(ATTEMPT_FILE)) || recordMarked(ref, dir))) {
      proc = find(ref, dir).orElse(null);
    }
    if (proc == null) {
      deleteQuietly(dir);
      return;
    }
    Proc p = proc;
    log.info(
        "Build {}: stopping attempt {} (process {}): {}.",
        ref.buildId(),
        ref,
        p.handle().pid(),
        reason);
    if (grace.isZero() || !p.handle().isAlive()) {
      killNow(p);
      return;
    }
    // provisionerd itself: a sandbox around it passes no signal on.
    runnerOf(p.handle()).destroy();
    timers.schedule(() -> killNow(p), grace.toMillis(), TimeUnit.MILLISECONDS);
  }

  /**
   * SIGKILL to the attempt's process group (so the build's own processes go too), then clean up.
   */
  private void killNow(Proc p) {
    List<ProcessHandle> descendants = p.handle().descendants().toList();
    signalGroup(p.handle().pid(), p.ref());
    p.handle().destroyForcibly();
    descendants.forEach(ProcessHandle::destroyForcibly);
    procs.remove(p.ref().name(), p);
    deleteQuietly(p.dir());
  }

  /** SIGKILL to every process in the attempt's process group (led by its provisionerd). */
  private void signalGroup(long pid, AttemptRef ref) {
    if (setsid == null) {
      return;
    }
    if (!Signals.sendGroup(pid, Signals.Signal.SIGKILL)) {
      log.debug("Attempt {}: process group {} is empty or cannot be signalled.", ref, pid);
    }
  }

  /**
   * Kills a refused second runner of an attempt when it is a process this launcher started for that
   * attempt (a launch that ran twice), never the holder's. One started by hand is not this
   * launcher's to kill: it exits by itself.
   */
  @Override
  public void removeRunner(AttemptRef ref, Runner intruder, Runner holder) {
    Proc p = procs.get(ref.name());
    if (p == null
        || intruder.pid() == null
        || intruder.pid().equals(holder.pid())
        || runnerOf(p.handle()).pid() != intruder.pid()) {
      return;
    }
    log.warn(
        "Build {}: killing process {}, a second runner of attempt {}, which {} holds.",
        ref.buildId(),
        intruder.pid(),
        ref.name(),
        holder.describe());
    p.handle().destroyForcibly();
  }

  /**
   * The runner of a call is the provisionerd process this launcher started for an attempt, proven
   * by the kernel: the call's connection comes over loopback from a socket that process itself
   * holds open ({@code /proc/net/tcp}, then {@code /proc/<pid>/fd}). Not a build's own processes
   * (provisionerd's children get none of its sockets), not another attempt's, not anyone holding a
   * copy of the token. Attempts started by an earlier dispatcher are found by the attempt marker on
   * their command line.
   */
  @Override
  public RunnerProof prove(RunnerCall call) {
    if (call.remoteHost() == null || !loopback(call.remoteHost())) {
      return new RunnerProof.Unproven(
          "the call came from "
              + call.remoteHost()
              + ", and a local attempt's provisionerd calls over loopback");
    }
    Optional<String> socket = ports.clientSocket(call.remotePort(), call.localPort());
    if (socket.isEmpty()) {
      return new RunnerProof.Vanished(
          "no connection from port " + call.remotePort() + " is open on this machine");
    }
    // An attempt with no network of its own calls through its socket, which only its sandbox
    // reaches: the relay's connection (held by this process) speaks for that attempt's runner.
    Optional<AttemptRef> relayed =
        relay == null ? Optional.empty() : relay.attemptOf(call.remotePort());
    if (relayed.isPresent() && ports.holds(ProcessHandle.current().pid(), socket.get())) {
      Proc p = procs.get(relayed.get().name());
      if (p != null) {
        return proven(call, runnerOf(p.handle()), p.ref());
      }
    }
    for (Proc p : procs.values()) {
      ProcessHandle runner = runnerOf(p.handle());
      if (ports.holds(runner.pid(), socket.get())) {
        return proven(call, runner, p.ref());
      }
    }
    // Started by an earlier dispatcher, and not looked at since.
    Optional<ProcessHandle> other =
        ProcessHandle.allProcesses()
            .filter(LocalLauncher::runs)
            .filter(h -> attemptDirOf(h).filter(d -> d.startsWith(runDir)).isPresent())
            .filter(h -> ports.holds(h.pid(), socket.get()))
            .findFirst();
    if (other.isPresent()) {
      Path dir = attemptDirOf(other.get()).orElseThrow();
      Optional<AttemptRef> ref = AttemptRef.parse(dir.getFileName().toString(), null);
      if (ref.isPresent()) {
        return proven(call, other.get(), ref.get());
      }
    }
    return new RunnerProof.Unproven(
        "its connection (from port "
            + call.remotePort()
            + ") is held by no provisionerd this dispatcher started");
  }

  private static RunnerProof proven(RunnerCall call, ProcessHandle runner, AttemptRef ref) {
    long start = runner.info().startInstant().map(Instant::toEpochMilli).orElse(0L);
    return new RunnerProof.Proven(
        new Runner(
            "local-" + runner.pid() + "-" + start,
            null,
            null,
            call.stated() == null ? null : call.stated().host(),
            runner.pid()),
        ref);
  }

  /**
   * The provisionerd of an attempt's process: the process itself, or, when it started a sandbox
   * around provisionerd, the descendant that carries the attempt marker.
   */
  private static ProcessHandle runnerOf(ProcessHandle launched) {
    if (runs(launched)) {
      return launched;
    }
    return launched.descendants().filter(LocalLauncher::runs).findFirst().orElse(launched);
  }

  /** Whether the process is a provisionerd (carries the marker, and is no sandbox around one). */
  private static boolean runs(ProcessHandle h) {
    List<String> args = commandLine(h);
    if (args.isEmpty() || args.stream().noneMatch(a -> a.startsWith(MARKER))) {
      return false;
    }
    String exe = Path.of(args.get(0)).getFileName().toString();
    return !exe.equals("bwrap") && !exe.equals("setsid");
  }

  private static boolean loopback(String host) {
    return host.equals("127.0.0.1")
        || host.startsWith("127.")
        || host.equals("::1")
        || host.equals("0:0:0:0:0:0:0:1")
        || host.equals("::ffff:127.0.0.1");
  }

  @Override
  public List<AttemptRef> attempts() {
    List<AttemptRef> out = new ArrayList<>();
    try (DirectoryStream<Path> dirs = Files.newDirectoryStream(runDir)) {
      for (Path d : dirs) {
        AttemptRef.parse(d.getFileName().toString(), null).ifPresent(out::add);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list " + runDir, e);
    }
    return out;
  }

  /** The pid of a running attempt's provisionerd, for tests and diagnostics. */
  public Optional<Long> pid(String attemptName) {
    return Optional.ofNullable(procs.get(attemptName)).map(p -> p.handle().pid());
  }

  @Override
  public void close() {
    timers.shutdown();
    if (relay != null) {
      // Its attempts run on; the next dispatcher relays their sockets again (find).
      relay.close();
    }
  }

  private static void createPrivateDirectory(Path dir) throws IOException {
    try {
      Files.createDirectory(
          dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    } catch (FileAlreadyExistsException e) {
      // A launch that failed half-way: its leftovers are replaced below.
    }
  }

  /**
   * An attempt whose directory exists without its attempt file: its dispatcher died between
   * starting the process and recording it. Looks for a live process that carries the attempt's
   * marker and, when there is one, records it now. True when the attempt file exists afterwards.
   */
  private boolean recordMarked(AttemptRef ref, Path dir) {
    if (!Files.isDirectory(dir)) {
      return false;
    }
    Path attempt = dir.toAbsolutePath();
    Optional<ProcessHandle> found =
        ProcessHandle.allProcesses()
            .filter(ProcessHandle::isAlive)
            .filter(h -> attemptDirOf(h).filter(attempt::equals).isPresent())
            .findFirst();
    if (found.isEmpty()) {
      return false;
    }
    try {
      writeAttemptFile(dir, ref.buildId(), ref.attempt(), found.get());
      log.info(
          "Build {}: found attempt {} running as process {}, never recorded; recorded it now.",
          ref.buildId(),
          ref,
          found.get().pid());
      return true;
    } catch (IOException e) {
      log.warn("Attempt {}: cannot record process {}: {}.", ref, found.get().pid(), e.toString());
      return false;
    }
  }

  /**
   * The attempt directory a provisionerd this launcher started carries on its command line ({@link
   * #MARKER}); empty for any other process.
   */
  public static Optional<Path> attemptDirOf(ProcessHandle h) {
    for (String arg : commandLine(h)) {
      if (arg.startsWith(MARKER)) {
        return Optional.of(Path.of(arg.substring(MARKER.length())));
      }
    }
    return Optional.empty();
  }

  /**
   * A process's arguments. Linux's {@code /proc/<pid>/cmdline} has them whole, where {@code
   * ProcessHandle.Info} gives up on command lines as long as a class path makes them.
   */
  static List<String> commandLine(ProcessHandle h) {
    Path proc = Path.of("/proc", Long.toString(h.pid()), "cmdline");
    try {
      byte[] raw = Files.readAllBytes(proc);
      return List.of(new String(raw, StandardCharsets.UTF_8).split("\0"));
    } catch (IOException | SecurityException e) {
      return h.info().arguments().map(List::of).orElse(List.of());
    }
  }

  private static void writeAttemptFile(Path dir, Attempt a, ProcessHandle handle)
      throws IOException {
    writeAttemptFile(dir, a.buildId(), a.attempt(), handle, a.apiUrl());
  }

  private static void writeAttemptFile(Path dir, long buildId, int attempt, ProcessHandle handle)
      throws IOException {
    writeAttemptFile(dir, buildId, attempt, handle, null);
  }

  /**
   * The attempt file: what a restarted dispatcher finds the attempt's process by, and the API its
   * relay carries. Read-only to a sandboxed attempt ({@link Sandbox}).
   */
  private static void writeAttemptFile(
      Path dir, long buildId, int attempt, ProcessHandle handle, String api) throws IOException {
    ObjectNode info = Json.MAPPER.createObjectNode();
    if (api != null) {
      info.put("api", api);
    }
    info.put("pid", handle.pid());
    info.put("start", handle.info().startInstant().map(Instant::toString).orElse(null));
    info.put("build", buildId);
    info.put("attempt", attempt);
    Path tmp = dir.resolve(ATTEMPT_FILE + ".tmp");
    Files.writeString(
        tmp, Json.write(info), StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING);
    Files.move(tmp, dir.resolve(ATTEMPT_FILE), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
  }

  private static String tail(Path file, int lines) {
    try {
      List<String> all = Files.readAllLines(file, StandardCharsets.UTF_8);
      return String.join(" | ", all.subList(Math.max(0, all.size() - lines), all.size())).strip();
    } catch (NoSuchFileException e) {
      return "";
    } catch (IOException e) {
      return "(cannot read " + file + ": " + e.getMessage() + ")";
    }
  }

  /** Deletes a directory tree; parts that vanish meanwhile (a concurrent cleanup) are fine. */
  private static void deleteQuietly(Path dir) {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> walk = Files.walk(dir)) {
      walk.sorted(Comparator.reverseOrder())
          .forEach(
              p -> {
                try {
                  Files.deleteIfExists(p);
                } catch (IOException e) {
                  log.debug("Cannot delete {}: {}.", p, e.toString());
                }
              });
    } catch (IOException | UncheckedIOException e) {
      log.debug("Cannot delete all of {}: {}.", dir, e.toString());
    }
  }
}
