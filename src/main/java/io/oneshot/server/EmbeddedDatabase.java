package io.oneshot.server;

import io.oneshot.process.Signals;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The PostgreSQL that {@code oneshot dev} runs when it is given no database URL: kept in {@code
 * <data-dir>/postgres}, so that queued builds survive a restart, with synchronous commits (a
 * committed enqueue is never lost). A server left running by a dev process that was killed is shut
 * down (fast mode) before a new one starts.
 */
public final class EmbeddedDatabase implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(EmbeddedDatabase.class);

  private final EmbeddedPostgres pg;

  private EmbeddedDatabase(EmbeddedPostgres pg) {
    this.pg = pg;
  }

  public static EmbeddedDatabase start(Path dataDir) {
    if (EmbeddedDatabase.class.getResource("/postgres-linux-x86_64.txz") == null
        && EmbeddedDatabase.class.getResource("/postgres-linux-arm_64.txz") == null) {
      throw new IllegalArgumentException(
          "this oneshot was built without the embedded PostgreSQL (the container image's jar,"
              + " built with -Pslim): give oneshot dev a --database-url, or use the full jar");
    }
    Path pgData = dataDir.resolve("postgres");
    try {
      Files.createDirectories(pgData);
      stopLeftover(pgData);
      EmbeddedPostgres pg =
          EmbeddedPostgres.builder()
              .setDataDirectory(pgData)
              .setCleanDataDirectory(false)
              .setRegisterShutdownHook(false)
              .setServerConfig("synchronous_commit", "on")
              .setServerConfig("max_connections", "100")
              .setServerConfig("listen_addresses", "127.0.0.1")
              .setPGStartupWait(Duration.ofSeconds(60))
              .setOutputRedirector(
                  ProcessBuilder.Redirect.appendTo(dataDir.resolve("postgres.log").toFile()))
              .setErrorRedirector(
                  ProcessBuilder.Redirect.appendTo(dataDir.resolve("postgres.log").toFile()))
              .start();
      return new EmbeddedDatabase(pg);
    } catch (IOException e) {
      throw new UncheckedIOException(
          "cannot start the embedded PostgreSQL in "
              + pgData
              + " (its log: "
              + dataDir.resolve("postgres.log")
              + ")",
          e);
    }
  }

  /** A postmaster still running on this data directory (its dev process was killed): stop it. */
  private static void stopLeftover(Path pgData) throws IOException {
    Path pidFile = pgData.resolve("postmaster.pid");
    if (!Files.exists(pidFile)) {
      return;
    }
    List<String> lines = Files.readAllLines(pidFile, StandardCharsets.UTF_8);
    if (lines.isEmpty()) {
      return;
    }
    long pid;
    try {
      pid = Long.parseLong(lines.get(0).strip());
    } catch (NumberFormatException e) {
      return;
    }
    Optional<ProcessHandle> postmaster = ProcessHandle.of(pid).filter(ProcessHandle::isAlive);
    if (postmaster.isEmpty()) {
      return;
    }
    log.info("Stopping the PostgreSQL (pid {}) left running by an earlier oneshot dev.", pid);
    try {
      // SIGINT: PostgreSQL's fast shutdown.
      if (!Signals.send(pid, Signals.Signal.SIGINT)) {
        throw new IOException("SIGINT could not be sent");
      }
      postmaster.get().onExit().get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new IOException("cannot stop the PostgreSQL left running as pid " + pid + ": " + e, e);
    }
  }

  /** The URL of the {@code postgres} database as the superuser {@code postgres}. */
  public String url() {
    return "postgresql://postgres@127.0.0.1:" + pg.getPort() + "/postgres";
  }

  public int port() {
    return pg.getPort();
  }

  @Override
  public void close() {
    try {
      pg.close();
    } catch (IOException e) {
      log.warn("Cannot stop the embedded PostgreSQL: {}.", e.getMessage());
    }
  }
}
