package io.oneshot.testing;

import io.oneshot.build.Database;
import io.oneshot.build.Migrator;
import io.vertx.core.Vertx;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.UUID;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.postgresql.PostgreSQLContainer;

/**
 * The PostgreSQL the tests run against, found once per test JVM: the server in {@code
 * ONESHOT_TEST_DATABASE_URL} if set, else a Testcontainers PostgreSQL if Docker works, else an
 * embedded PostgreSQL. On that server each JVM gets a database of its own, dropped at exit.
 */
public final class TestDatabase {
  private static String url;

  private TestDatabase() {}

  /** {@code postgresql://...} of this JVM's private database, migrated. */
  public static synchronized String url() {
    if (url == null) {
      String u = create();
      Vertx vertx = Vertx.vertx();
      try (Database db = Database.open(vertx, u, 1, "test-migrate")) {
        Migrator.migrate(db);
      } finally {
        Database.await(vertx.close());
      }
      url = u;
    }
    return url;
  }

  /** The same database as a JDBC URL, for test assertions. */
  public static String jdbcUrl() {
    return jdbcUrl(url());
  }

  /** A {@code postgresql://} URL of the test server as a JDBC URL. */
  public static String jdbcUrl(String url) {
    URI u = URI.create(url);
    String userInfo = u.getUserInfo();
    String user = userInfo == null ? "postgres" : userInfo.split(":", 2)[0];
    String password = userInfo != null && userInfo.contains(":") ? userInfo.split(":", 2)[1] : "";
    return "jdbc:postgresql://"
        + u.getHost()
        + ":"
        + u.getPort()
        + u.getPath()
        + "?user="
        + user
        + (password.isEmpty() ? "" : "&password=" + password);
  }

  private static String server;

  /** The databases this JVM created, by name, with the URL they are dropped through. */
  private static final java.util.Map<String, String> created = new java.util.LinkedHashMap<>();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(TestDatabase::dropCreated));
  }

  /**
   * Drops every database this JVM created (at exit, and before a halt that skips the exit's hooks:
   * {@link FirstFailure}, for every break of the mutation list, left one behind each).
   */
  public static synchronized void dropCreated() {
    created.forEach(
        (name, adminJdbc) -> {
          try {
            exec(adminJdbc, "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
          } catch (RuntimeException e) {
            // the server may already be gone
          }
        });
    created.clear();
  }

  /** A new, empty database on the test server (not migrated), dropped at exit. */
  public static synchronized String fresh() {
    url();
    return create();
  }

  private static String create() {
    if (server == null) {
      String env = System.getenv("ONESHOT_TEST_DATABASE_URL");
      server = env != null && !env.isBlank() ? env : dockerWorks() ? container() : embedded();
    }
    String name = "oneshot_test_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    URI s =
        URI.create(server.replaceFirst("^jdbc:", "").replaceFirst("^postgres://", "postgresql://"));
    String adminJdbc =
        jdbc(s, s.getPath().isEmpty() || s.getPath().equals("/") ? "/postgres" : s.getPath());
    exec(adminJdbc, "CREATE DATABASE " + name);
    created.put(name, adminJdbc);
    return "postgresql://"
        + (s.getUserInfo() == null ? "postgres" : s.getUserInfo())
        + "@"
        + s.getHost()
        + ":"
        + (s.getPort() < 0 ? 5432 : s.getPort())
        + "/"
        + name;
  }

  private static String jdbc(URI s, String path) {
    String userInfo = s.getUserInfo();
    String user = userInfo == null ? "postgres" : userInfo.split(":", 2)[0];
    String password = userInfo != null && userInfo.contains(":") ? userInfo.split(":", 2)[1] : "";
    return "jdbc:postgresql://"
        + s.getHost()
        + ":"
        + (s.getPort() < 0 ? 5432 : s.getPort())
        + path
        + "?user="
        + user
        + (password.isEmpty() ? "" : "&password=" + password);
  }

  private static void exec(String jdbcUrl, String sql) {
    try (Connection c = DriverManager.getConnection(jdbcUrl);
        Statement st = c.createStatement()) {
      st.execute(sql);
    } catch (SQLException e) {
      throw new IllegalStateException(sql + ": " + e.getMessage(), e);
    }
  }

  private static boolean dockerWorks() {
    try {
      return DockerClientFactory.instance().isDockerAvailable();
    } catch (RuntimeException | LinkageError e) {
      return false;
    }
  }

  @SuppressWarnings("resource")
  private static String container() {
    PostgreSQLContainer pg = new PostgreSQLContainer("postgres:17-alpine");
    pg.start();
    return "postgresql://"
        + pg.getUsername()
        + ":"
        + pg.getPassword()
        + "@"
        + pg.getHost()
        + ":"
        + pg.getFirstMappedPort()
        + "/"
        + pg.getDatabaseName();
  }

  private static String embedded() {
    try {
      EmbeddedPostgres pg =
          EmbeddedPostgres.builder().setServerConfig("max_connections", "300").start();
      return "postgresql://postgres@127.0.0.1:" + pg.getPort() + "/postgres";
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start an embedded PostgreSQL for the tests", e);
    }
  }
}
