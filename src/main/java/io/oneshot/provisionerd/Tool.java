package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.build.BuildState;
import io.oneshot.build.LogLine;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * An infrastructure tool provisionerd runs (terraform, pulumi): each of its runs a stage of the
 * build, started with the stage's milestone, interrupted with SIGINT on cancel, timeout and
 * SIGTERM, and said in the log when it ends; a failed run's error is the tool's own first error.
 */
final class Tool {
  /** Sees a run's lines and keeps the first error among them, for the build's error. */
  interface Lines extends RunContext.LineHandler {
    /** The first error the tool printed, or null. */
    String firstError();
  }

  private final String name;
  private final String binary;
  private final String installHint;

  /**
   * @param name how the log names it ("terraform")
   * @param binary the executable to run
   * @param installHint what to do when it cannot be started ("install terraform on PATH ...")
   */
  Tool(String name, String binary, String installHint) {
    this.name = name;
    this.binary = binary;
    this.installHint = installHint;
  }

  /**
   * Runs the tool with {@code args} in {@code dir} as the stage {@code stage}, its command line in
   * the log as {@code shown} (its secrets masked). Returns null when the next step may run, else
   * the build's result: stopped, not started, or failed with the tool's first error.
   */
  Provisioner.Result step(
      RunContext ctx,
      Path dir,
      Map<String, String> env,
      String stage,
      List<String> args,
      List<String> shown,
      Lines lines)
      throws InterruptedException {
    if (ctx.stopRequested()) {
      return ctx.stopped(ctx.stopReason(), null);
    }
    ctx.milestone(stage, name + " " + stage + " started: " + name + " " + String.join(" ", shown));
    long started = System.nanoTime();
    RunContext.Exit exit;
    try {
      exit = ctx.run(process(dir, env, args), RunContext.Interrupt.INT, stage, lines);
    } catch (IOException e) {
      String error = "cannot start " + binary + ": " + e.getMessage() + " (" + installHint + ")";
      ctx.system("error", error);
      return new Provisioner.Result(BuildState.FAILED, 127, error);
    }
    long ms = (System.nanoTime() - started) / 1_000_000;
    if (exit.stoppedBy() != null) {
      return ctx.stopped(exit.stoppedBy(), exit.code());
    }
    if (exit.code() != 0) {
      String first = lines.firstError();
      String error =
          name
              + " "
              + stage
              + " failed (exit code "
              + exit.code()
              + ")"
              + (first == null ? "" : ": " + first);
      ctx.system("error", error);
      return new Provisioner.Result(BuildState.FAILED, exit.code(), error);
    }
    ctx.system("info", name + " " + stage + " finished in " + ms + " ms");
    return null;
  }

  /**
   * Runs the tool with {@code args} for the JSON object it prints on stdout (its stderr goes to the
   * log as warnings of the stage "output"); null when it failed, was stopped, or printed no object
   * with an entry.
   */
  JsonNode json(RunContext ctx, Path dir, Map<String, String> env, List<String> args)
      throws InterruptedException {
    StringBuilder json = new StringBuilder();
    try {
      RunContext.Exit exit =
          ctx.run(
              process(dir, env, args),
              RunContext.Interrupt.INT,
              "output",
              (stream, text) -> {
                if (stream.equals(LogLine.STDOUT)) {
                  json.append(text).append('\n');
                } else {
                  ctx.line(stream, "warn", "output", text);
                }
              });
      if (exit.code() != 0 || exit.stoppedBy() != null) {
        return null;
      }
    } catch (IOException e) {
      return null;
    }
    JsonNode all = Json.tree(json.toString());
    return all == null || !all.isObject() || all.isEmpty() ? null : all;
  }

  private ProcessBuilder process(Path dir, Map<String, String> env, List<String> args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(binary);
    cmd.addAll(args);
    ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile());
    pb.environment().clear();
    pb.environment().putAll(env);
    return pb;
  }
}
