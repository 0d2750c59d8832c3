package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.BuildState;
import io.oneshot.build.LogLine;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Map.Entry;

/**
 * Where a terraform or pulumi build's program comes from: {@code input.files}, written into the
 * work directory, or {@code input.git} ({@code url}, {@code ref}, {@code path}), fetched into
 * {@code src/} of the work directory at that ref alone (a branch, a tag or a commit; the remote's
 * default branch when none is named) with a shallow fetch, the commit it resolved to said in the
 * log.
 */
final class ProgramSource {
  private ProgramSource() {}

  /** The program's directory, or the failed result that says why there is none. */
  record Prepared(Path dir, Provisioner.Result failed) {}

  static Prepared prepare(RunContext ctx, JsonNode in) throws InterruptedException {
    Path work = ctx.workDir().toAbsolutePath().normalize();
    JsonNode git = in.path("git");
    if (!git.isObject()) {
      try {
        writeFiles(work, in.path("files"));
      } catch (IOException e) {
        return fail(ctx, "cannot write the program into " + work + ": " + e.getMessage());
      }
      return new Prepared(work, null);
    }
    String url = git.path("url").asText();
    String ref = git.path("ref").asText("HEAD");
    Path src = work.resolve("src");
    Path dir = src.resolve(git.path("path").asText("")).normalize();
    if (!dir.startsWith(src)) {
      return fail(ctx, "git path " + git.path("path").asText() + " points outside the checkout");
    }
    Map<String, String> env = new HashMap<>(ctx.env());
    // Never wait for a password nobody can type; credentials come from the route's environment
    // (a credential helper, GIT_ASKPASS or an SSH key of the Job template).
    env.put("GIT_TERMINAL_PROMPT", "0");
    env.put("GIT_SSH_COMMAND", env.getOrDefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"));
    ctx.milestone("source", "fetching " + url + " at " + ref);
    long started = System.nanoTime();
    try {
      Files.createDirectories(src);
    } catch (IOException e) {
      return fail(ctx, "cannot make " + src + ": " + e.getMessage());
    }
    List<List<String>> steps =
        List.of(
            List.of("git", "init", "-q", "."),
            // ext:: and the like run a command of the URL's choosing: never.
            List.of(
                "git",
                "-c",
                "protocol.ext.allow=never",
                "fetch",
                "-q",
                "--depth",
                "1",
                "--no-tags",
                url,
                ref),
            List.of("git", "-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"));
    for (List<String> step : steps) {
      Provisioner.Result r = git(ctx, env, src, step, url, ref);
      if (r != null) {
        return new Prepared(null, r);
      }
    }
    StringBuilder commit = new StringBuilder();
    try {
      ProcessBuilder pb = new ProcessBuilder("git", "rev-parse", "HEAD").directory(src.toFile());
      pb.environment().clear();
      pb.environment().putAll(env);
      ctx.run(
          pb,
          RunContext.Interrupt.TERM,
          "source",
          (stream, text) -> {
            if (stream.equals(LogLine.STDOUT)) {
              commit.append(text.strip());
            }
          });
    } catch (IOException e) {
      // the checkout is there; only its name is missing from the log
    }
    if (!Files.isDirectory(dir)) {
      return fail(
          ctx,
          "git path " + git.path("path").asText() + " is not a directory of " + url + " at " + ref);
    }
    ctx.system(
        "info",
        "fetched "
            + url
            + " at "
            + ref
            + (commit.isEmpty() ? "" : " (commit " + commit + ")")
            + " in "
            + (System.nanoTime() - started) / 1_000_000
            + " ms");
    return new Prepared(dir, null);
  }

  private static Provisioner.Result git(
      RunContext ctx, Map<String, String> env, Path dir, List<String> cmd, String url, String ref)
      throws InterruptedException {
    if (ctx.stopRequested()) {
      return ctx.stopped(ctx.stopReason(), null);
    }
    ProcessBuilder pb = new ProcessBuilder(new ArrayList<>(cmd)).directory(dir.toFile());
    pb.environment().clear();
    pb.environment().putAll(env);
    StringBuilder firstError = new StringBuilder();
    RunContext.Exit exit;
    try {
      exit =
          ctx.run(
              pb,
              RunContext.Interrupt.TERM,
              "source",
              (stream, text) -> {
                if (stream.equals(LogLine.STDERR) && firstError.isEmpty() && !text.isBlank()) {
                  firstError.append(text.strip());
                }
                ctx.line(stream, stream.equals(LogLine.STDERR) ? "error" : null, "source", text);
              });
    } catch (IOException e) {
      return fail(ctx, "cannot start git: " + e.getMessage() + " (install git in the image)")
          .failed();
    }
    if (exit.stoppedBy() != null) {
      return ctx.stopped(exit.stoppedBy(), exit.code());
    }
    if (exit.code() != 0) {
      return fail(
              ctx,
              "cannot fetch "
                  + url
                  + " at "
                  + ref
                  + " (git "
                  + (cmd.contains("fetch")
                      ? "fetch"
                      : cmd.contains("checkout") ? "checkout" : "init")
                  + " exit code "
                  + exit.code()
                  + (firstError.isEmpty() ? "" : ": " + firstError)
                  + ")")
          .failed();
    }
    return null;
  }

  private static Prepared fail(RunContext ctx, String error) {
    ctx.system("error", error);
    return new Prepared(null, new Provisioner.Result(BuildState.FAILED, null, error));
  }

  /** Writes {@code files} (paths kept inside {@code root}). */
  static void writeFiles(Path root, JsonNode files) throws IOException {
    for (Entry<String, JsonNode> f : files.properties()) {
      Path target = root.resolve(f.getKey()).normalize();
      if (!target.startsWith(root) || target.equals(root)) {
        throw new IOException("file name " + f.getKey() + " points outside the program");
      }
      Files.createDirectories(target.getParent());
      Files.writeString(target, f.getValue().asText(), StandardCharsets.UTF_8);
    }
  }
}
