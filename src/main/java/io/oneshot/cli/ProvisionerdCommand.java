package io.oneshot.cli;

import io.oneshot.provisionerd.Provisionerd;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(
    name = "provisionerd",
    header = "Runs one build in its pod or process, and exits.",
    mixinStandardHelpOptions = true,
    description = {
      "Runs one build and exits: acquires the build its token is good for, runs it, streams its"
          + " log (also to stdout), reports the outcome. Started by the launcher in each"
          + " attempt's pod or process; not usually run by hand.",
      ""
    },
    footer = {
      "",
      "Example (what the local launcher runs in an attempt's directory):",
      "  ONESHOT_API_URL=http://127.0.0.1:8080 ONESHOT_TOKEN_FILE=./token \\",
      "    oneshot provisionerd --work-dir ./work",
      "",
      "SIGTERM (a pod deleted or evicted, a node drained) does not stop the build: it runs to"
          + " its end and provisionerd takes no other. `oneshot builds cancel ID` stops a build.",
      "",
      "Exit codes, the build's outcome (what `kubectl get jobs` shows): 0 the build succeeded;"
          + " 10 it failed; 11 it was canceled; 12 it ended elsewhere meanwhile (nothing"
          + " reported); 1 the outcome could not be reported; 2 bad setup; 3 the API refused the"
          + " token; 5 another runner holds this attempt (a second pod or process with the same"
          + " token), and nothing was run; 143 SIGTERM came before the build was acquired, and"
          + " nothing was run."
    })
final class ProvisionerdCommand implements Callable<Integer> {
  @Option(
      names = "--api-url",
      paramLabel = "URL",
      defaultValue = "${env:ONESHOT_API_URL}",
      description = "The dispatcher's API (env ONESHOT_API_URL).")
  String apiUrl;

  @Option(
      names = "--api-socket",
      paramLabel = "FILE",
      defaultValue = "${env:ONESHOT_API_SOCKET}",
      description =
          "A Unix socket that carries the API (env ONESHOT_API_SOCKET): what the local launcher"
              + " gives an attempt with no network of its own (launcher.local.network: none)."
              + " provisionerd relays a port of its loopback to it and calls the API there.")
  Path apiSocket;

  @Option(
      names = "--token-file",
      paramLabel = "FILE",
      defaultValue = "${env:ONESHOT_TOKEN_FILE}",
      description =
          "A file holding the build token (env ONESHOT_TOKEN_FILE; or the token itself in"
              + " ONESHOT_TOKEN). The file is deleted once read, when it can be.")
  Path tokenFile;

  @Option(
      names = "--work-dir",
      paramLabel = "DIR",
      defaultValue = "${env:ONESHOT_WORK_DIR:-.}",
      description = "Where the build runs (env ONESHOT_WORK_DIR; default: the current directory).")
  Path workDir;

  @Option(
      names = "--retry-for",
      paramLabel = "DURATION",
      defaultValue = "${env:ONESHOT_RETRY_FOR:-2m}",
      description = "How long API calls are retried before giving up (default: ${DEFAULT-VALUE}).")
  String retryFor;

  @Option(
      names = "--warm-up",
      description =
          "Run one script build against an API of its own in this process, then exit: what an"
              + " image's build runs with -XX:ArchiveClassesAtExit, so that the class data sharing"
              + " archive holds what a build loads (the Dockerfile does).")
  boolean warmUp;

  @Override
  public Integer call() {
    if (warmUp) {
      return io.oneshot.provisionerd.WarmUp.run();
    }
    if (apiUrl == null || apiUrl.isBlank()) {
      throw new CliException(Main.USAGE, "no API URL: set ONESHOT_API_URL or pass --api-url");
    }
    String token = System.getenv("ONESHOT_TOKEN");
    if (tokenFile != null) {
      try {
        token = Files.readString(tokenFile, StandardCharsets.UTF_8).strip();
      } catch (IOException e) {
        throw new CliException(
            Main.USAGE, "cannot read the token file " + tokenFile + ": " + e.getMessage());
      }
      try {
        Files.deleteIfExists(tokenFile);
      } catch (IOException e) {
        // a read-only mount (a Kubernetes Secret): the file stays, readable by this user only
      }
    }
    if (token == null || token.isBlank()) {
      throw new CliException(Main.USAGE, "no build token: set ONESHOT_TOKEN_FILE or ONESHOT_TOKEN");
    }
    Duration retry;
    try {
      retry = io.oneshot.config.Units.parseDuration(retryFor);
    } catch (IllegalArgumentException e) {
      throw new CliException(Main.USAGE, "--retry-for: " + e.getMessage());
    }
    URI api = URI.create(apiUrl);
    if (apiSocket != null) {
      try {
        // Lives as long as this process: the build's every call goes through it.
        api = io.oneshot.provisionerd.SocketBridge.open(apiSocket).through(api);
      } catch (IOException e) {
        throw new CliException(
            Main.USAGE, "cannot relay the API socket " + apiSocket + ": " + e.getMessage());
      }
    }
    // The build's log as written, for kubectl logs: a pod's locale most often names no character
    // set, which Java takes for ASCII ('?' for terraform's box drawing).
    java.io.PrintStream echo =
        new java.io.PrintStream(System.out, true, Main.terminalCharset(System.out.charset()));
    return Provisionerd.run(
        new Provisionerd.Options(api, token, workDir.toAbsolutePath(), retry), echo);
  }
}
