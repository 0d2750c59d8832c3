package io.oneshot.cli;

import io.oneshot.build.Database;
import io.oneshot.build.Migrator;
import io.oneshot.config.ConfigLoader;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(
    name = "migrate",
    header = "Brings the database schema to this version.",
    mixinStandardHelpOptions = true,
    description = {
      "Brings the database schema to this version of oneshot and exits. The dispatcher does the"
          + " same at start (under a lock), so this is only needed to migrate ahead of a rollout."
    },
    footer = {
      "",
      "Example:",
      "  oneshot migrate --database-url postgresql://oneshot@db:5432/oneshot"
    })
final class MigrateCommand implements Callable<Integer> {
  @Spec picocli.CommandLine.Model.CommandSpec spec;

  @Option(
      names = "--database-url",
      paramLabel = "URL",
      defaultValue = "${env:ONESHOT_DATABASE_URL}",
      description = "postgresql://user:password@host:5432/database (env ONESHOT_DATABASE_URL).")
  String url;

  @Option(
      names = "--config",
      paramLabel = "FILE",
      description = "Take the database URL from this configuration file instead.")
  Path config;

  @Override
  public Integer call() {
    String u = url;
    if (config != null) {
      u = ConfigLoader.load(config, System.getenv()).database().url();
    }
    if (u == null) {
      throw new CliException(
          Main.USAGE, "no database: pass --database-url, --config or set ONESHOT_DATABASE_URL");
    }
    Vertx vertx = Vertx.vertx();
    try (Database db = Database.open(vertx, u, 1, "migrate")) {
      Migrator.Result r = Migrator.migrate(db);
      if (r.applied().isEmpty()) {
        spec.commandLine().getOut().println("schema is at version " + r.to() + "; nothing to do");
      } else {
        spec.commandLine()
            .getOut()
            .println(
                "schema migrated from version "
                    + r.from()
                    + " to "
                    + r.to()
                    + ": "
                    + String.join(", ", r.applied()));
      }
      return Main.OK;
    } catch (java.io.UncheckedIOException e) {
      throw new CliException(
          Main.UNREACHABLE,
          "cannot reach the database at " + Database.redact(u) + ": " + e.getMessage());
    } finally {
      Database.await(vertx.close());
    }
  }
}
