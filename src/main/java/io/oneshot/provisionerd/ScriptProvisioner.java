package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.BuildState;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs {@code input.command} in the work directory with {@code input.env} added to the environment;
 * exit code 0 is success. On cancel or timeout the command and everything it started get SIGTERM,
 * then SIGKILL after the route's cancel grace.
 */
final class ScriptProvisioner implements Provisioner {

  @Override
  public Result run(RunContext ctx) throws InterruptedException {
    JsonNode in = ctx.input();
    List<String> command = new ArrayList<>();
    in.path("command").forEach(n -> command.add(n.asText()));
    Map<String, String> env = new HashMap<>(ctx.env());
    for (Map.Entry<String, JsonNode> e : in.path("env").properties()) {
      env.put(e.getKey(), e.getValue().asText());
    }
    ProcessBuilder pb = new ProcessBuilder(command).directory(ctx.workDir().toFile());
    pb.environment().clear();
    pb.environment().putAll(env);
    ctx.milestone("script", "script started: " + display(command));
    RunContext.Exit exit;
    try {
      exit = ctx.run(pb, RunContext.Interrupt.TERM, "script", null);
    } catch (IOException e) {
      String error = "cannot start " + command.get(0) + ": " + e.getMessage();
      ctx.system("error", error);
      return new Result(BuildState.FAILED, 127, error);
    }
    if (exit.stoppedBy() != null) {
      return ctx.stopped(exit.stoppedBy(), exit.code());
    }
    if (exit.code() == 0) {
      ctx.system("info", "script exited with code 0");
      return new Result(BuildState.SUCCEEDED, 0, null);
    }
    String error = "script exited with code " + exit.code();
    ctx.system("error", error);
    return new Result(BuildState.FAILED, exit.code(), error);
  }

  /** The command as a person would type it. */
  static String display(List<String> command) {
    StringBuilder b = new StringBuilder();
    for (String arg : command) {
      if (!b.isEmpty()) {
        b.append(' ');
      }
      if (arg.matches("[A-Za-z0-9_./=:,@%+-]+")) {
        b.append(arg);
      } else {
        b.append('\'').append(arg.replace("'", "'\\''")).append('\'');
      }
    }
    return b.toString();
  }
}
