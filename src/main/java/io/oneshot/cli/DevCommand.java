package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.config.ConfigException;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.server.EmbeddedDatabase;
import io.oneshot.server.OneshotServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(
    name = "dev",
    header = "Runs oneshot on this machine, with its own PostgreSQL.",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Runs oneshot on this machine: an embedded PostgreSQL (unless --database-url is given),"
          + " the dispatcher with the local launcher (each build attempt is its own process), and"
          + " the API on 127.0.0.1. Prints the API URL and admin token and writes them to"
          + " <data-dir>/dev.env. Ctrl-C stops it; queued builds are kept for the next start."
          + " One oneshot dev runs per data directory.",
      ""
    },
    footer = {
      "",
      "Examples:",
      "  oneshot dev",
      "  oneshot dev --port 9090 --data-dir /tmp/oneshot-dev",
      "  oneshot dev --database-url postgresql://postgres@127.0.0.1:5432/oneshot",
      "",
      "The routes come from the bundled dispatcher/oneshot.yaml unless --config names another."
    })
final class DevCommand implements Callable<Integer> {
  static final String BUNDLED_CONFIG = "/dispatcher/oneshot.yaml";

  @Spec picocli.CommandLine.Model.CommandSpec spec;

  @Option(
      names = "--port",
      paramLabel = "PORT",
      defaultValue = "8080",
      description = "The API port on 127.0.0.1 (default: ${DEFAULT-VALUE}; 0 picks a free one).")
  int port;

  @Option(
      names = "--data-dir",
      paramLabel = "DIR",
      defaultValue =
          "${env:ONESHOT_DATA_DIR:-${env:XDG_DATA_HOME:-${env:HOME:-${sys:user.home}}/.local/share}"
              + "/oneshot/dev}",
      // Paths on lines of their own: help text is wrapped at a path's dots too.
      description = {
        "Where the database, the admin token, dev.env and the attempts' directories live:",
        "ONESHOT_DATA_DIR, else $XDG_DATA_HOME/oneshot/dev,",
        "else ~/.local/share/oneshot/dev.",
        "Default: ${DEFAULT-VALUE}"
      })
  Path dataDir;

  @Option(
      names = "--database-url",
      paramLabel = "URL",
      defaultValue = "${env:ONESHOT_DATABASE_URL}",
      description = "Use this PostgreSQL instead of the embedded one (env ONESHOT_DATABASE_URL).")
  String databaseUrl;

  @Option(
      names = "--config",
      paramLabel = "FILE",
      description = "Routes and limits from FILE instead of the bundled dispatcher/oneshot.yaml.")
  Path config;

  /** When {@code oneshot dev} submits its demo build. */
  enum Demo {
    never,
    first,
    always
  }

  @Option(
      names = "--demo",
      paramLabel = "WHEN",
      arity = "0..1",
      fallbackValue = "always",
      defaultValue = "never",
      description =
          "Once up, submit a demo build and print its log: always (--demo alone), first (only"
              + " when the data directory is new: scripts/dev's choice) or never (the default).")
  Demo demo;

  @Override
  public Integer call() throws Exception {
    if (port < 0 || port > 65535) {
      throw new CliException(Main.USAGE, "--port: must be from 0 to 65535");
    }
    // A port in use is said before anything is made: the embedded PostgreSQL's first start (a
    // cluster made, every migration run) took seconds and left the data directory behind.
    if (port != 0 && inUse(port)) {
      throw new CliException(
          Main.USAGE, "port " + port + " on 127.0.0.1 is in use; pass --port with another one");
    }
    PrintWriter out = spec.commandLine().getOut();
    Path dir = dataDir.toAbsolutePath();
    // The admin token is the first thing a dev start writes: without it, this is the first start.
    boolean fresh = !Files.exists(dir.resolve("admin-token"));
    Files.createDirectories(dir);
    OneshotConfig base = loadConfig();
    // Held while this dev runs; the system releases it however the process ends.
    DevLock lock = DevLock.acquire(dir);
    try {
      return serve(dir, base, out, demo == Demo.always || demo == Demo.first && fresh);
    } finally {
      lock.close();
    }
  }

  /** Whether something listens on {@code port} of 127.0.0.1 (binding it there fails). */
  private static boolean inUse(int port) {
    try (java.net.ServerSocket probe = new java.net.ServerSocket()) {
      probe.bind(
          new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), port), 1);
      return false;
    } catch (IOException e) {
      return true;
    }
  }

  private int serve(Path dir, OneshotConfig base, PrintWriter out, boolean runDemo)
      throws Exception {
    EmbeddedDatabase embedded = null;
    String url = databaseUrl;
    if (url == null) {
      out.println("Starting the embedded PostgreSQL in " + dir.resolve("postgres") + " …");
      out.flush();
      embedded = EmbeddedDatabase.start(dir);
      url = embedded.url();
    }
    String token = adminToken(dir);
    OneshotConfig cfg =
        new OneshotConfig(
            new OneshotConfig.Database(
                url, base.database().poolSize(), base.database().reconnect()),
            new OneshotConfig.Api(
                "127.0.0.1",
                port,
                null,
                token,
                base.api().headerTimeout(),
                base.api().keepAliveTimeout(),
                base.api().bodyTimeout(),
                base.api().maxConnections(),
                null,
                -1),
            base.dispatch(),
            base.limits(),
            new OneshotConfig.Launcher(
                "local",
                new OneshotConfig.Local(
                    dir.resolve("runs"),
                    base.launcher().local().javaOptions(),
                    base.launcher().local().command(),
                    base.launcher().local().passEnv(),
                    base.launcher().local().pluginCacheDir() != null
                        ? base.launcher().local().pluginCacheDir()
                        : dir.resolve("plugin-cache"),
                    base.launcher().local().isolation(),
                    base.launcher().local().readOnly(),
                    base.launcher().local().network()),
                base.launcher().kubernetes()),
            base.logging(),
            base.retention(),
            base.routes(),
            base.sources(),
            base.encryption().keys().isEmpty()
                ? new OneshotConfig.Encryption(List.of(encryptionKey(dir)))
                : base.encryption(),
            base.teams(),
            List.of());
    OneshotServer server;
    try {
      server = OneshotServer.start(cfg);
    } catch (RuntimeException e) {
      if (embedded != null) {
        embedded.close();
      }
      if (causedBy(e, BindException.class)) {
        throw new CliException(
            Main.USAGE, "port " + port + " on 127.0.0.1 is in use; pass --port with another one");
      }
      throw e;
    }
    String apiUrl = "http://127.0.0.1:" + server.port();
    Path env = writeEnv(dir, apiUrl, token);
    EmbeddedDatabase pg = embedded;
    out.println();
    out.println("oneshot dev is running.");
    out.println("  API:    " + apiUrl);
    out.println("  token:  " + token);
    out.println(
        "  data:   " + dir + (pg == null ? "" : " (PostgreSQL on 127.0.0.1:" + pg.port() + ")"));
    out.println("  routes: " + routeSummary(cfg));
    out.println();
    out.println("In another shell:");
    out.println("  source " + env);
    out.println("  scripts/oneshot submit --script 'echo hello from oneshot' --follow");
    out.println("  scripts/oneshot builds list");
    out.println();
    out.println("Ctrl-C stops oneshot dev; queued builds are kept and run at the next start.");
    out.flush();
    if (runDemo) {
      runDemo(apiUrl, token, out);
    }
    Lifecycle.runUntilSignal(
        () -> {
          server.close();
          if (pg != null) {
            pg.close();
          }
        },
        cfg.dispatch().shutdownGrace());
    return Main.OK;
  }

  private OneshotConfig loadConfig() {
    if (config != null) {
      return ConfigLoader.load(config, Map.of());
    }
    try (InputStream in = DevCommand.class.getResourceAsStream(BUNDLED_CONFIG)) {
      if (in == null) {
        throw new ConfigException("the bundled configuration " + BUNDLED_CONFIG + " is missing");
      }
      return ConfigLoader.parse(
          new String(in.readAllBytes(), StandardCharsets.UTF_8),
          "dispatcher/oneshot.yaml",
          Map.of());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String routeSummary(OneshotConfig cfg) {
    StringBuilder b = new StringBuilder();
    for (OneshotConfig.Route r : cfg.routes()) {
      if (!b.isEmpty()) {
        b.append(", ");
      }
      b.append(r.name()).append(' ').append(Text.tags(r.tags()));
      b.append(" (").append(r.maxConcurrent()).append(')');
    }
    return b.toString();
  }

  /** The admin token, made once and kept in {@code <data-dir>/admin-token} (mode 0600). */
  static String adminToken(Path dir) throws IOException {
    Path file = dir.resolve("admin-token");
    if (Files.exists(file)) {
      String t = Files.readString(file, StandardCharsets.UTF_8).strip();
      if (t.length() >= 16) {
        return t;
      }
    }
    byte[] b = new byte[24];
    new SecureRandom().nextBytes(b);
    String token = "osa_" + Base64.getUrlEncoder().withoutPadding().encodeToString(b);
    writePrivate(file, token + "\n");
    return token;
  }

  /**
   * The key that seals workspace state and sensitive values, made once and kept in {@code
   * <data-dir>/encryption-key} (mode 0600), unless the configuration gives keys.
   */
  static OneshotConfig.Key encryptionKey(Path dir) throws IOException {
    Path file = dir.resolve("encryption-key");
    if (Files.exists(file)) {
      String t = Files.readString(file, StandardCharsets.UTF_8).strip();
      if (t.length() >= 32) {
        return new OneshotConfig.Key("dev", t);
      }
    }
    byte[] b = new byte[32];
    new SecureRandom().nextBytes(b);
    String secret = Base64.getEncoder().encodeToString(b);
    writePrivate(file, secret + "\n");
    return new OneshotConfig.Key("dev", secret);
  }

  /** {@code <data-dir>/dev.env}: {@code source} it to point the CLI at this server. */
  static Path writeEnv(Path dir, String url, String token) throws IOException {
    Path file = dir.resolve("dev.env");
    writePrivate(
        file,
        "ONESHOT_URL=" + url + "\nONESHOT_TOKEN=" + token + "\nexport ONESHOT_URL ONESHOT_TOKEN\n");
    return file;
  }

  private static void writePrivate(Path file, String content) throws IOException {
    Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
    Files.deleteIfExists(tmp);
    Files.createFile(
        tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    Files.writeString(tmp, content, StandardCharsets.UTF_8);
    Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }

  private void runDemo(String apiUrl, String token, PrintWriter out) {
    ApiClient api = new ApiClient(apiUrl, token);
    String body =
        """
        {"tags": {}, "input": {"provisioner": "script", "command": ["sh", "-c",
          "echo \\"hello from build $ONESHOT_BUILD_ID, attempt $ONESHOT_ATTEMPT\\"; echo \\"running in $PWD\\"; uname -sm; echo done"]}}
        """;
    JsonNode created = api.post("/api/v1/builds", body);
    long id = created.path("id").asLong();
    out.println(
        "Demo: build " + id + " queued on route " + created.path("route").asText() + "; its log:");
    JsonNode b = Waiting.follow(api, id, out, false);
    Waiting.summary(b, out);
    out.println("(see it again: scripts/oneshot builds show " + id + ")");
    out.flush();
  }

  private static boolean causedBy(Throwable e, Class<? extends Throwable> type) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (type.isInstance(t)) {
        return true;
      }
    }
    return false;
  }
}
