package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import io.oneshot.build.BuildState;
import io.oneshot.build.LogLine;
import io.oneshot.build.Sensitive;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs a terraform module: writes {@code input.files} and the workspace's state into the work
 * directory, then {@code terraform init}, {@code plan -out} and {@code apply} of that plan (a
 * destroy plan for {@code transition: destroy}), each with {@code -json}, whose events become log
 * lines with their level and stage. While plan and apply run, every change terraform makes to its
 * state file is uploaded, so that a partial apply is never lost, even if provisionerd is killed;
 * the state as terraform left it goes with {@code complete}, whatever the outcome. Cancel, timeout
 * and SIGTERM send terraform SIGINT, which it answers by stopping cleanly and writing its state;
 * after the route's grace it is killed.
 */
final class TerraformProvisioner implements Provisioner {
  static final String STATE_FILE = "terraform.tfstate";
  static final String VARS_FILE = "oneshot.auto.tfvars.json";

  private final Tool tool;

  TerraformProvisioner() {
    this(System.getenv().getOrDefault("ONESHOT_TERRAFORM", "terraform"));
  }

  TerraformProvisioner(String terraform) {
    this.tool =
        new Tool("terraform", terraform, "install terraform on PATH or set ONESHOT_TERRAFORM");
  }

  @Override
  public Result run(RunContext ctx) throws InterruptedException {
    JsonNode in = ctx.input();
    boolean destroy = "destroy".equals(in.path("transition").asText("apply"));
    String before = ctx.build().state();
    ProgramSource.Prepared program = ProgramSource.prepare(ctx, in);
    if (program.failed() != null) {
      return program.failed();
    }
    Path dir = program.dir();
    try {
      writeVariables(dir, in);
      if (before != null) {
        Files.writeString(dir.resolve(STATE_FILE), before, StandardCharsets.UTF_8);
      }
    } catch (IOException | UncheckedIOException e) {
      String error = "cannot write the module into " + dir + ": " + e.getMessage();
      ctx.system("error", error);
      return new Result(BuildState.FAILED, null, error);
    }
    if (ctx.build().workspace() != null) {
      ctx.system(
          "info",
          "workspace "
              + ctx.build().workspace()
              + ": "
              + (before == null
                  ? "no state yet"
                  : "starting from state version " + ctx.build().stateVersion()));
    } else {
      // Against a real cloud, what an apply without a workspace creates is known to no state
      // afterwards: no later build can change or destroy it.
      ctx.system(
          "warn",
          "no workspace: terraform's state is not kept after this build, so what it creates is"
              + " known to no state (submit with a workspace to keep it)");
    }

    Map<String, String> env = new HashMap<>(ctx.env());
    env.put("TF_IN_AUTOMATION", "1");
    env.put("TF_INPUT", "0");
    env.put("CHECKPOINT_DISABLE", "1");

    StateWatch watch =
        new StateWatch(ctx, dir.resolve(STATE_FILE), before, s -> Json.tree(s) != null);
    Result result;
    try {
      result = steps(ctx, dir, env, destroy, watch);
    } finally {
      watch.stop();
    }
    if (ctx.build().workspace() == null) {
      return result;
    }
    String after = watch.current();
    boolean changed = after != null && (!after.equals(before) || watch.uploadedAny());
    return changed ? result.withState(after) : result;
  }

  private Result steps(
      RunContext ctx, Path dir, Map<String, String> env, boolean destroy, StateWatch watch)
      throws InterruptedException {
    Result init = step(ctx, dir, env, "init", List.of("init", "-input=false", "-json"));
    if (init != null) {
      return init;
    }
    List<String> plan = new ArrayList<>(List.of("plan", "-input=false", "-json", "-out=tfplan"));
    if (destroy) {
      plan.add("-destroy");
    }
    watch.start();
    Result p = step(ctx, dir, env, "plan", plan);
    if (p != null) {
      return p;
    }
    Result a = step(ctx, dir, env, "apply", List.of("apply", "-input=false", "-json", "tfplan"));
    if (a != null) {
      return a;
    }
    JsonNode outputs = outputs(ctx, dir, env);
    ctx.system("info", "terraform " + (destroy ? "destroy" : "apply") + " succeeded");
    return new Result(BuildState.SUCCEEDED, 0, null, outputs, null);
  }

  /** One terraform step: null when the next may run, else the build's result. */
  private Result step(
      RunContext ctx, Path dir, Map<String, String> env, String stage, List<String> args)
      throws InterruptedException {
    return tool.step(ctx, dir, env, stage, args, args, new JsonEvents(ctx, stage));
  }

  /** {@code terraform output -json}: non-sensitive values as they are, sensitive ones redacted. */
  private JsonNode outputs(RunContext ctx, Path dir, Map<String, String> env)
      throws InterruptedException {
    JsonNode all = tool.json(ctx, dir, env, List.of("output", "-json"));
    if (all == null) {
      return null;
    }
    ObjectNode out = Json.MAPPER.createObjectNode();
    for (Map.Entry<String, JsonNode> e : all.properties()) {
      ObjectNode o = out.putObject(e.getKey());
      o.set("type", e.getValue().path("type"));
      if (e.getValue().path("sensitive").asBoolean(false)) {
        o.put("sensitive", true);
        JsonNode v = e.getValue().path("value");
        ctx.mask(Sensitive.text(v));
      } else {
        o.set("value", e.getValue().path("value"));
      }
    }
    return out;
  }

  /** Writes {@code input.variables} as terraform's auto-loaded variables file. */
  static void writeVariables(Path dir, JsonNode in) throws IOException {
    JsonNode vars = in.path("variables");
    if (vars.isObject() && !vars.isEmpty()) {
      Files.writeString(dir.resolve(VARS_FILE), Json.write(vars), StandardCharsets.UTF_8);
    }
  }

  /**
   * Turns terraform's {@code -json} events into log lines with their level; remembers the first
   * error diagnostic for the build's error. Lines that are not JSON (stderr, a crash) pass as they
   * are.
   */
  private static final class JsonEvents implements Tool.Lines {
    private final RunContext ctx;
    private final String stage;
    private volatile String firstError;

    JsonEvents(RunContext ctx, String stage) {
      this.ctx = ctx;
      this.stage = stage;
    }

    @Override
    public void line(String stream, String text) {
      JsonNode ev = null;
      if (stream.equals(LogLine.STDOUT) && text.startsWith("{")) {
        try {
          ev = Json.MAPPER.readTree(text);
        } catch (IOException e) {
          ev = null;
        }
      }
      if (ev == null || !ev.isObject()) {
        ctx.line(stream, stream.equals(LogLine.STDERR) ? "error" : null, stage, text);
        return;
      }
      String level = level(ev.path("@level").asText("info"));
      emit(level, ev.path("@message").asText(""));
      JsonNode diag = ev.path("diagnostic");
      if (diag.isObject()) {
        String detail = diag.path("detail").asText("");
        JsonNode range = diag.path("range");
        if (range.isObject()) {
          emit(
              level,
              "  on "
                  + range.path("filename").asText()
                  + " line "
                  + range.path("start").path("line").asText());
        }
        if (!detail.isEmpty()) {
          emit(level, detail);
        }
        if ("error".equals(diag.path("severity").asText()) && firstError == null) {
          String summary = diag.path("summary").asText();
          firstError = detail.isEmpty() ? summary : summary + ": " + firstLine(detail);
        }
      }
    }

    @Override
    public String firstError() {
      return firstError;
    }

    private void emit(String level, String message) {
      for (String part : message.split("\n")) {
        if (!part.isBlank()) {
          ctx.line(LogLine.STDOUT, level, stage, part);
        }
      }
    }

    private static String firstLine(String s) {
      int nl = s.indexOf('\n');
      return nl < 0 ? s : s.substring(0, nl);
    }

    private static String level(String tf) {
      return switch (tf) {
        case "error" -> "error";
        case "warn" -> "warn";
        case "debug", "trace" -> "debug";
        default -> "info";
      };
    }
  }
}
