package io.oneshot.cli;

import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.server.OneshotServer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(
    name = "dispatcher",
    mixinStandardHelpOptions = true,
    description = {
      "Runs the long-lived dispatcher: the HTTP API, and (on the replica that leads) the claim"
          + " loop that launches one attempt per build. Stops cleanly on SIGTERM or Ctrl-C;"
          + " running builds keep running."
    },
    footer = {
      "",
      "Environment: ONESHOT_DATABASE_URL and ONESHOT_ADMIN_TOKEN override the file.",
      "",
      "Example:",
      "  oneshot dispatcher --config dispatcher/oneshot.yaml"
    })
final class DispatcherCommand implements Callable<Integer> {
  @Option(
      names = "--config",
      paramLabel = "FILE",
      defaultValue = "dispatcher/oneshot.yaml",
      description = "The configuration (default: ${DEFAULT-VALUE}).")
  Path config;

  @Option(names = "--check", description = "Validate the configuration, print a summary and exit.")
  boolean check;

  @Override
  public Integer call() throws InterruptedException {
    OneshotConfig c = ConfigLoader.load(config, System.getenv());
    if (check) {
      System.out.println(config + ": valid; " + c.routes().size() + " routes:");
      c.routes()
          .forEach(
              r ->
                  System.out.println(
                      "  " + r.name() + " " + r.tags() + " maxConcurrent=" + r.maxConcurrent()));
      return Main.OK;
    }
    LogConfigurator.apply(c.logging().format(), c.logging().levels());
    OneshotServer server = OneshotServer.start(c);
    Duration grace = c.dispatch().shutdownGrace();
    // The API's drain leaves a little of the grace period for closing everything else.
    Duration drain =
        grace.minusSeconds(2).compareTo(Duration.ofSeconds(1)) < 0
            ? Duration.ofSeconds(1)
            : grace.minusSeconds(2);
    Lifecycle.runUntilSignal(() -> server.close(drain), grace);
    return Main.OK;
  }
}
