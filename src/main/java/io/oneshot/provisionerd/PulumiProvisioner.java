package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import io.oneshot.build.BuildState;
import io.oneshot.build.PulumiCheckpoint;
import io.oneshot.build.Sensitive;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Runs one operation ({@code up}, {@code preview}, {@code destroy}, {@code refresh}) of one Pulumi
 * stack. The stack's state is the workspace's: its checkpoint is put in a DIY file backend of the
 * pod's own ({@code PULUMI_BACKEND_URL=file://...}, at {@code
 * .pulumi/stacks/<project>/<stack>.json}, pulumi/pulumi pkg/backend/diy/store.go,
 * projectReferenceStore.StackBasePath, with {@code .pulumi/meta.yaml} at version 1 for that
 * project-scoped layout, meta.go), and taken out of it whole, while the operation runs (whenever
 * Pulumi saves it) and at its end. No lock of Pulumi's ever outlives the pod: the backend is the
 * pod's, and oneshot runs one build per workspace at a time.
 *
 * <p>Steps, each a stage of the log: the program ({@link ProgramSource}); {@code install} (the
 * route's {@code ONESHOT_PULUMI_INSTALL}, {@code npm ci} by default when the program has a
 * package.json), with its time and peak memory; {@code stack}: {@code pulumi stack select --create}
 * of {@code organization/<project>/<stack>} (the DIY backend's only organization, store.go
 * ParseReference); {@code config}: {@code pulumi config set-all} with {@code --secret} for the keys
 * {@code input.sensitive} names; then the operation with {@code --yes --skip-preview
 * --non-interactive}; then {@code pulumi stack output --json}, whose secrets Pulumi prints as
 * "[secret]" (stack_output.go: display.MassageSecrets) and which are left out of the outputs.
 *
 * <p>A stack's settings file ({@code Pulumi.<stack>.yaml}) is not kept: its secrets settings are
 * written from the checkpoint's {@code secrets_providers} where the program has none ({@code
 * encryptionsalt} for the passphrase provider, {@code secretsprovider} and {@code encryptedkey} for
 * a cloud one), as Pulumi wrote them when it made the stack. Cancel, timeout and SIGTERM send
 * SIGINT once: Pulumi stops at a safe point and saves the checkpoint (a second one would terminate
 * it at once: pkg/backend/cancellation.go); after the route's grace it is killed.
 */
final class PulumiProvisioner implements Provisioner {
  /** The route's install command (run by {@code sh -c}); empty: none. */
  static final String INSTALL_ENV = "ONESHOT_PULUMI_INSTALL";

  /** The secrets provider a new stack is made with (pulumi stack select --secrets-provider). */
  static final String SECRETS_PROVIDER_ENV = "ONESHOT_PULUMI_SECRETS_PROVIDER";

  private static final String STATE_DIR = ".oneshot-pulumi";

  private final Tool tool;

  PulumiProvisioner() {
    this(System.getenv().getOrDefault("ONESHOT_PULUMI", "pulumi"));
  }

  PulumiProvisioner(String pulumi) {
    this.tool = new Tool("pulumi", pulumi, "install the Pulumi CLI on PATH or set ONESHOT_PULUMI");
  }

  @Override
  public Result run(RunContext ctx) throws InterruptedException {
    JsonNode in = ctx.input();
    String op = in.path("operation").asText("up");
    String project = in.path("project").asText();
    String stack = in.path("stack").asText();
    String ref = "organization/" + project + "/" + stack;
    String before = ctx.build().state();

    JsonNode handed = before == null ? null : PulumiCheckpoint.parse(before);
    String problem = before == null ? null : PulumiCheckpoint.problemOf(handed);
    if (problem != null) {
      return fail(
          ctx,
          "workspace "
              + ctx.build().workspace()
              + " holds a state that is not a Pulumi checkpoint (version "
              + ctx.build().stateVersion()
              + ": "
              + problem
              + "); a pulumi build cannot continue it");
    }
    ProgramSource.Prepared program = ProgramSource.prepare(ctx, in);
    if (program.failed() != null) {
      return program.failed();
    }
    Path dir = program.dir();
    String named = projectName(dir);
    if (named == null) {
      return fail(ctx, "the program has no Pulumi.yaml naming its project in " + where(ctx, dir));
    }
    if (!named.equals(project)) {
      return fail(
          ctx,
          "the program's Pulumi.yaml names project "
              + named
              + ", but the build asks for project "
              + project);
    }
    Path backend = ctx.workDir().toAbsolutePath().resolve(STATE_DIR);
    Path checkpoint =
        backend.resolve(".pulumi").resolve("stacks").resolve(project).resolve(stack + ".json");
    try {
      Files.createDirectories(checkpoint.getParent());
      Files.writeString(
          backend.resolve(".pulumi").resolve("meta.yaml"), "version: 1\n", StandardCharsets.UTF_8);
      if (before != null) {
        Files.writeString(checkpoint, before, StandardCharsets.UTF_8);
        stackSettings(dir.resolve("Pulumi." + stack + ".yaml"), handed);
      }
    } catch (IOException e) {
      return fail(
          ctx, "cannot write the stack's checkpoint into " + backend + ": " + e.getMessage());
    }
    if (ctx.build().workspace() != null) {
      ctx.system(
          "info",
          "workspace "
              + ctx.build().workspace()
              + ": "
              + (before == null
                  ? "no checkpoint yet (a new stack)"
                  : "stack "
                      + ref
                      + " from state version "
                      + ctx.build().stateVersion()
                      + ", "
                      + PulumiCheckpoint.resourceCount(handed)
                      + " resources"));
    } else if (!op.equals("preview")) {
      ctx.system(
          "warn",
          "no workspace: the stack's checkpoint is not kept after this build, so what it creates is"
              + " known to no state (submit with a workspace to keep it)");
    }

    Map<String, String> env = new HashMap<>(ctx.env());
    // The stack's passphrase is a secret of the route's: never in the log, whatever prints it.
    String passphrase = env.get("PULUMI_CONFIG_PASSPHRASE");
    if (passphrase != null && !passphrase.isEmpty()) {
      ctx.mask(passphrase);
    }
    env.put("PULUMI_BACKEND_URL", "file://" + backend);
    env.put("PULUMI_SKIP_UPDATE_CHECK", "true");
    env.put("PULUMI_SKIP_CONFIRMATIONS", "true");
    env.putIfAbsent(
        "PULUMI_HOME", ctx.workDir().toAbsolutePath().resolve(".pulumi-home").toString());

    StateWatch watch =
        new StateWatch(ctx, checkpoint, before, s -> PulumiCheckpoint.problemOf(s) == null);
    Result result;
    try {
      result = steps(ctx, dir, env, op, ref, watch);
    } finally {
      watch.stop();
    }
    if (ctx.build().workspace() == null || op.equals("preview")) {
      return result;
    }
    String after = watch.current();
    if (after != null && PulumiCheckpoint.problemOf(after) != null) {
      ctx.system("error", "the stack's checkpoint as Pulumi left it does not parse; not kept");
      return result;
    }
    boolean changed = after != null && (!after.equals(before) || watch.uploadedAny());
    return changed ? result.withState(after) : result;
  }

  private Result steps(
      RunContext ctx, Path dir, Map<String, String> env, String op, String ref, StateWatch watch)
      throws InterruptedException {
    Result install = install(ctx, dir, env);
    if (install != null) {
      return install;
    }
    List<String> select =
        new ArrayList<>(
            List.of("stack", "select", "--create", "--non-interactive", "--stack", ref));
    String provider = env.get(SECRETS_PROVIDER_ENV);
    if (provider != null && !provider.isBlank()) {
      select.add("--secrets-provider");
      select.add(provider);
    }
    Result s = step(ctx, dir, env, "stack", select, List.of());
    if (s != null) {
      return s;
    }
    JsonNode config = ctx.input().path("config");
    if (config.isObject() && !config.isEmpty()) {
      Set<String> secret = new HashSet<>(Sensitive.names(ctx.input()));
      List<String> set =
          new ArrayList<>(List.of("config", "set-all", "--non-interactive", "--stack", ref));
      List<String> shown = new ArrayList<>(set);
      for (Map.Entry<String, JsonNode> e : config.properties()) {
        boolean isSecret = secret.contains(e.getKey());
        String flag = isSecret ? "--secret" : "--plaintext";
        String value = e.getValue().isTextual() ? e.getValue().asText() : e.getValue().toString();
        set.add(flag);
        set.add(e.getKey() + "=" + value);
        shown.add(flag);
        shown.add(e.getKey() + "=" + (isSecret ? Sensitive.MASK : value));
      }
      Result c = step(ctx, dir, env, "config", set, shown);
      if (c != null) {
        return c;
      }
    }
    List<String> args = new ArrayList<>(List.of(op));
    if (!op.equals("preview")) {
      args.addAll(List.of("--yes", "--skip-preview"));
    }
    args.addAll(List.of("--non-interactive", "--stack", ref));
    if (!op.equals("preview")) {
      watch.start();
    }
    Result o = step(ctx, dir, env, op, args, List.of());
    if (o != null) {
      return o;
    }
    JsonNode outputs = op.equals("destroy") ? null : outputs(ctx, dir, env, ref);
    ctx.system("info", "pulumi " + op + " of " + ref + " succeeded");
    return new Result(BuildState.SUCCEEDED, 0, null, outputs, null);
  }

  /**
   * The install step: the route's command, else {@code npm ci} for a Node.js program (one with a
   * package.json); said with its time and the peak memory of its processes.
   */
  private Result install(RunContext ctx, Path dir, Map<String, String> env)
      throws InterruptedException {
    String command = env.get(INSTALL_ENV);
    if (command == null) {
      command = Files.exists(dir.resolve("package.json")) ? "npm ci" : "";
    }
    if (command.isBlank()) {
      return null;
    }
    if (ctx.stopRequested()) {
      return ctx.stopped(ctx.stopReason(), null);
    }
    ProcessBuilder pb = new ProcessBuilder("sh", "-c", command).directory(dir.toFile());
    pb.environment().clear();
    pb.environment().putAll(env);
    ctx.milestone("install", "install started: " + command);
    long started = System.nanoTime();
    PeakMemory peak = new PeakMemory();
    RunContext.Exit exit;
    try {
      exit = ctx.run(pb, RunContext.Interrupt.TERM, "install", null, peak::watch);
    } catch (IOException e) {
      return fail(ctx, "cannot start the install step (" + command + "): " + e.getMessage());
    } finally {
      peak.stop();
    }
    long ms = (System.nanoTime() - started) / 1_000_000;
    if (exit.stoppedBy() != null) {
      return ctx.stopped(exit.stoppedBy(), exit.code());
    }
    String usage = ms + " ms" + peak.describe();
    if (exit.code() != 0) {
      return fail(
          ctx,
          "the install step ("
              + command
              + ") failed (exit code "
              + exit.code()
              + ") after "
              + usage);
    }
    ctx.milestone("install", "install finished in " + usage);
    return null;
  }

  /** One pulumi step, its command line shown as {@code shown}: null when the next may run. */
  private Result step(
      RunContext ctx,
      Path dir,
      Map<String, String> env,
      String stage,
      List<String> args,
      List<String> shown)
      throws InterruptedException {
    return tool.step(
        ctx, dir, env, stage, args, shown.isEmpty() ? args : shown, new ErrorLines(ctx, stage));
  }

  /**
   * {@code pulumi stack output --json}: each output's value, but secrets, which Pulumi prints as
   * "[secret]", are left out (marked sensitive).
   */
  private JsonNode outputs(RunContext ctx, Path dir, Map<String, String> env, String ref)
      throws InterruptedException {
    JsonNode all =
        tool.json(
            ctx,
            dir,
            env,
            List.of("stack", "output", "--json", "--non-interactive", "--stack", ref));
    if (all == null) {
      return null;
    }
    ObjectNode out = Json.MAPPER.createObjectNode();
    for (Map.Entry<String, JsonNode> e : all.properties()) {
      ObjectNode o = out.putObject(e.getKey());
      if (e.getValue().isTextual() && e.getValue().asText().equals("[secret]")) {
        o.put("sensitive", true);
      } else {
        o.set("value", e.getValue());
      }
    }
    return out;
  }

  private static final Pattern NAME =
      Pattern.compile("^name:\\s*['\"]?([A-Za-z0-9_.-]+)['\"]?\\s*(#.*)?$", Pattern.MULTILINE);

  /** The project name of the program's Pulumi.yaml (or Pulumi.yml), or null. */
  static String projectName(Path dir) {
    for (String f : new String[] {"Pulumi.yaml", "Pulumi.yml"}) {
      try {
        Matcher m = NAME.matcher(Files.readString(dir.resolve(f), StandardCharsets.UTF_8));
        if (m.find()) {
          return m.group(1);
        }
      } catch (IOException e) {
        // the other spelling, or none
      }
    }
    return null;
  }

  /**
   * Writes the secrets settings of the checkpoint's secrets provider into the stack's settings file
   * where it has none: Pulumi keeps them in both when it makes a stack (the passphrase provider's
   * salt as {@code encryptionsalt}, a cloud provider's URL and key as {@code secretsprovider} and
   * {@code encryptedkey}), and needs the file's to decrypt the stack's config.
   */
  static void stackSettings(Path file, JsonNode checkpoint) throws IOException {
    if (checkpoint == null) {
      return;
    }
    JsonNode sp = checkpoint.path("checkpoint").path("latest").path("secrets_providers");
    String type = sp.path("type").asText("");
    JsonNode state = sp.path("state");
    List<String> lines = new ArrayList<>();
    String existing = Files.exists(file) ? Files.readString(file, StandardCharsets.UTF_8) : "";
    if (type.equals("passphrase") && state.path("salt").isTextual()) {
      if (!existing.contains("encryptionsalt:")) {
        lines.add("encryptionsalt: " + Json.write(state.path("salt")));
      }
    } else if (type.equals("cloud") && state.path("url").isTextual()) {
      if (!existing.contains("secretsprovider:")) {
        lines.add("secretsprovider: " + Json.write(state.path("url")));
        if (state.path("encryptedkey").isTextual()) {
          lines.add("encryptedkey: " + Json.write(state.path("encryptedkey")));
        }
      }
    }
    if (lines.isEmpty()) {
      return;
    }
    String text =
        (existing.isEmpty() || existing.endsWith("\n") ? existing : existing + "\n")
            + String.join("\n", lines)
            + "\n";
    Files.writeString(file, text, StandardCharsets.UTF_8);
  }

  private static String where(RunContext ctx, Path dir) {
    JsonNode git = ctx.input().path("git");
    return git.isObject()
        ? git.path("url").asText()
            + " at "
            + git.path("ref").asText("HEAD")
            + (git.has("path") ? ", path " + git.path("path").asText() : "")
        : "input.files";
  }

  private static Result fail(RunContext ctx, String error) {
    ctx.system("error", error);
    return new Result(BuildState.FAILED, null, error);
  }

  /** Sends Pulumi's lines to the log; keeps its first {@code error:} line for the build's error. */
  private static final class ErrorLines implements Tool.Lines {
    private final RunContext ctx;
    private final String stage;
    private volatile String first;

    ErrorLines(RunContext ctx, String stage) {
      this.ctx = ctx;
      this.stage = stage;
    }

    @Override
    public void line(String stream, String text) {
      String t = text.strip();
      boolean error = t.startsWith("error:");
      if (error && first == null) {
        first = t.substring("error:".length()).strip();
      }
      ctx.line(stream, error ? "error" : null, stage, text);
    }

    @Override
    public String firstError() {
      return first;
    }
  }
}
