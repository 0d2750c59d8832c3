package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.BuildState;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs {@code input.command} in the work directory with {@code input.env} added to the environment;
 * exit code 0 is success. On cancel or timeout the command and everything it started get SIGTERM,
 * then SIGKILL after the route's cancel grace.
 *
 * <p>A script that serves a queue source says that it took its job by creating the file {@code
 * ONESHOT_JOB_TAKEN_FILE} names (its first line, if any, says what it took): its build then no
 * longer counts as in flight for the source.
 */
final class ScriptProvisioner implements Provisioner {

  @Override
  public Result run(RunContext ctx) throws InterruptedException {
    JsonNode in = ctx.input();
    List<String> given = new ArrayList<>();
    in.path("command").forEach(n -> given.add(n.asText()));
    List<String> command;
    try {
      // The temporary directory, not the work directory: the build's files stay its own, and a
      // pod's root filesystem is read-only (the templates mount /tmp).
      command = viaFile(given, Path.of(System.getProperty("java.io.tmpdir")));
    } catch (IOException e) {
      String error = "cannot write the script to a file: " + e.getMessage();
      ctx.system("error", error);
      return new Result(BuildState.FAILED, 127, error);
    }
    Map<String, String> env = new HashMap<>(ctx.env());
    for (Map.Entry<String, JsonNode> e : in.path("env").properties()) {
      env.put(e.getKey(), e.getValue().asText());
    }
    Path taken =
        Path.of(System.getProperty("java.io.tmpdir"))
            .resolve("oneshot-job-taken-" + ctx.build().buildId() + "-" + ctx.build().attempt());
    deleteQuietly(taken);
    env.put(JOB_TAKEN_ENV, taken.toString());
    ProcessBuilder pb = new ProcessBuilder(command).directory(ctx.workDir().toFile());
    pb.environment().clear();
    pb.environment().putAll(env);
    ctx.milestone("script", "script started: " + display(command));
    RunContext.Exit exit;
    JobTakenWatch watch =
        new JobTakenWatch(
            taken,
            JobTakenWatch.EVERY,
            what -> {
              ctx.system("info", what);
              ctx.tookJob(what);
            });
    try {
      exit = ctx.run(pb, RunContext.Interrupt.TERM, "script", null, p -> watch.start());
    } catch (IOException e) {
      String error = "cannot start " + command.get(0) + ": " + e.getMessage();
      ctx.system("error", error);
      return new Result(BuildState.FAILED, 127, error);
    } finally {
      watch.stop();
      deleteQuietly(taken);
      if (command != given) {
        deleteQuietly(Path.of(command.get(1)));
      }
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

  static final String JOB_TAKEN_ENV = "ONESHOT_JOB_TAKEN_FILE";

  /** Linux refuses to start a program with one argument longer than this (MAX_ARG_STRLEN). */
  static final int LONGEST_ARGUMENT = 128 * 1024;

  /**
   * A {@code SHELL -c SCRIPT} whose script is too long to be one argument, as {@code SHELL FILE}
   * with the script written to {@code dir}; any other command as it is.
   */
  static List<String> viaFile(List<String> command, Path dir) throws IOException {
    if (command.size() != 3
        || !command.get(1).equals("-c")
        || command.get(2).getBytes(StandardCharsets.UTF_8).length < LONGEST_ARGUMENT - 1) {
      return command;
    }
    Path file = Files.createTempFile(dir, "oneshot-script-", ".sh");
    Files.writeString(file, command.get(2), StandardCharsets.UTF_8);
    return List.of(command.get(0), file.toString());
  }

  private static void deleteQuietly(Path file) {
    try {
      Files.deleteIfExists(file);
    } catch (IOException e) {
      // a file left in the temporary directory of a finished attempt harms nothing
    }
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
