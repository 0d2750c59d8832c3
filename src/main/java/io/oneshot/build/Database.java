package io.oneshot.build;

import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.net.PfxOptions;
import io.vertx.pgclient.PgBuilder;
import io.vertx.pgclient.PgConnectOptions;
import io.vertx.pgclient.SslMode;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.PoolOptions;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.Tuple;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** The connection pool to the queue's database, and the one place that waits on its futures. */
public final class Database implements AutoCloseable {
  /** How long {@link #await} waits for an answer, and a launch record for its own. */
  public static final Duration AWAIT_TIMEOUT = Duration.ofSeconds(60);

  private final Vertx vertx;
  private final PgConnectOptions options;
  private final Pool pool;
  private final Pool readPool;
  private final String poolName;
  private final int poolSize;

  private Database(
      Vertx vertx,
      PgConnectOptions options,
      Pool pool,
      Pool readPool,
      String poolName,
      int poolSize) {
    this.vertx = vertx;
    this.options = options;
    this.poolName = poolName;
    this.poolSize = poolSize;
    this.pool = pool;
    this.readPool = readPool;
  }

  /** The longest statement text prepared once per connection; every statement file is shorter. */
  static final int STATEMENT_SQL_LIMIT = 64 * 1024;

  /**
   * Opens a pool. Connections give up a statement after {@code statement_timeout} (30 s) so that a
   * stuck query never holds a dispatcher thread forever, and run without JIT compilation.
   */
  public static Database open(Vertx vertx, String url, int poolSize, String applicationName) {
    PgConnectOptions options = withApplicationName(parseUrl(url), applicationName);
    options.setReconnectAttempts(0);
    // Every statement is a constant of BuildStore: prepare each once per connection, however long
    // (the client's default leaves statements over 2,048 characters unprepared: parsed and planned
    // again on every call, as the claim, the acquire and the log append were).
    options
        .setCachePreparedStatements(true)
        .setPreparedStatementCacheMaxSize(128)
        .setPreparedStatementCacheSqlLimit(STATEMENT_SQL_LIMIT);
    // The main pool's connections carry a name of this process's own, so that pg_stat_activity
    // tells them apart from other replicas' (poolUse).
    String instance = Long.toHexString(ThreadLocalRandom.current().nextLong() >>> 32);
    String mainName = applicationName + " " + instance;
    PgConnectOptions main = withApplicationName(options, mainName);
    return new Database(
        vertx,
        options,
        pool(vertx, main, poolSize, "oneshot-" + applicationName),
        pool(vertx, options, READ_POOL_SIZE, "oneshot-" + applicationName + "-reads"),
        "oneshot-" + mainName,
        poolSize);
  }

  /** How the main pool is used now: connections running a statement, open, and its size. */
  public record PoolUse(int busy, int open, int max) {}

  /**
   * Reads the main pool's use from {@code pg_stat_activity} (its connections are named for this
   * process), on the read pool so that a busy main pool still answers.
   */
  public Future<PoolUse> poolUse() {
    return readPool
        .preparedQuery(
            "SELECT count(*) FILTER (WHERE state IS DISTINCT FROM 'idle') AS busy, count(*) AS open"
                + " FROM pg_stat_activity WHERE application_name = $1")
        .execute(Tuple.of(poolName))
        .map(
            rows -> {
              Row r = rows.iterator().next();
              return new PoolUse(
                  r.getLong("busy").intValue(), r.getLong("open").intValue(), poolSize);
            });
  }

  /**
   * Connections kept for the reads that tell operators how things stand ({@code /metrics}, {@code
   * oneshot routes}): they answer even while builds keep the main pool busy.
   */
  public static final int READ_POOL_SIZE = 2;

  /**
   * A small pool of its own on another database (a queue source's), with the same statement timeout
   * and settings as the queue's pools; {@link #optionsFor} gives its listener's options.
   */
  public static Pool foreignPool(Vertx vertx, String url, int size, String applicationName) {
    PgConnectOptions options = optionsFor(url, applicationName);
    return pool(vertx, options, size, "oneshot-" + applicationName);
  }

  /** Connect options for {@code url}, named {@code applicationName} in pg_stat_activity. */
  public static PgConnectOptions optionsFor(String url, String applicationName) {
    PgConnectOptions options = withApplicationName(parseUrl(url), applicationName);
    options.setReconnectAttempts(0);
    return options;
  }

  private static Pool pool(Vertx vertx, PgConnectOptions options, int size, String name) {
    return PgBuilder.pool()
        .with(
            new PoolOptions()
                .setMaxSize(size)
                .setMaxWaitQueueSize(10_000)
                .setConnectionTimeout(10)
                .setConnectionTimeoutUnit(TimeUnit.SECONDS)
                .setIdleTimeout(60)
                .setIdleTimeoutUnit(TimeUnit.SECONDS)
                .setName(name))
        .connectingTo(options)
        .using(vertx)
        .build();
  }

  /**
   * Parses {@code postgresql://user:password@host:port/database?options}, also in its {@code
   * postgres://} and {@code jdbc:postgresql://} spellings.
   */
  public static PgConnectOptions parseUrl(String url) {
    if (url == null || url.isBlank()) {
      throw new IllegalArgumentException(
          "database URL is empty; expected postgresql://user:password@host:5432/database");
    }
    String u = url.strip();
    if (u.startsWith("jdbc:")) {
      u = u.substring("jdbc:".length());
    }
    if (!u.startsWith("postgresql://") && !u.startsWith("postgres://")) {
      throw new IllegalArgumentException(
          "database URL '"
              + redact(url)
              + "' is not a PostgreSQL URL; expected postgresql://user:password@host:5432/database");
    }
    try {
      PgConnectOptions options = PgConnectOptions.fromUri(u);
      Map<String, String> props = new HashMap<>(options.getProperties());
      props.putIfAbsent("statement_timeout", "30000");
      props.putIfAbsent("idle_in_transaction_session_timeout", "60000");
      // The queue's statements touch a handful of rows; when the planner misjudges a claim over a
      // deep queue as costly, JIT compiling it takes half a second (measured by scripts/bench).
      props.putIfAbsent("jit", "off");
      options.setProperties(props);
      verifiedWithTheJvmsTrust(options);
      return options;
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          "database URL '" + redact(url) + "' cannot be parsed: " + e.getMessage(), e);
    }
  }

  /**
   * {@code sslmode=verify-ca} and {@code verify-full} check the server's certificate against the
   * JVM's trust store (the JDK's authorities and those of {@code ONESHOT_EXTRA_CA_CERTS}), and
   * {@code verify-full} also its host name, as libpq does; the driver would otherwise refuse both
   * modes for want of trust options.
   */
  static void verifiedWithTheJvmsTrust(PgConnectOptions options) {
    SslMode mode = options.getSslMode();
    if (mode != SslMode.VERIFY_CA && mode != SslMode.VERIFY_FULL) {
      return;
    }
    if (options.getTrustOptions() == null && !options.isTrustAll()) {
      io.oneshot.config.ExtraCaCerts.TrustStore store =
          io.oneshot.config.ExtraCaCerts.jvmTrustStore();
      options.setTrustOptions(
          new PfxOptions().setPath(store.file().toString()).setPassword(store.password()));
    }
    String algorithm = options.getHostnameVerificationAlgorithm();
    if (mode == SslMode.VERIFY_FULL && (algorithm == null || algorithm.isEmpty())) {
      options.setHostnameVerificationAlgorithm("HTTPS");
    }
  }

  /** The URL with its password replaced, for messages. */
  public static String redact(String url) {
    return url == null ? "" : url.replaceAll("(://[^:/@]+:)[^@/]*@", "$1***@");
  }

  private static PgConnectOptions withApplicationName(PgConnectOptions options, String name) {
    PgConnectOptions copy = new PgConnectOptions(options);
    Map<String, String> props = new HashMap<>(copy.getProperties());
    props.put("application_name", "oneshot-" + name);
    copy.setProperties(props);
    return copy;
  }

  /** Options for a dedicated connection (listener, leadership), named for pg_stat_activity. */
  public PgConnectOptions connectOptions(String applicationName) {
    return withApplicationName(options, applicationName);
  }

  public Pool pool() {
    return pool;
  }

  public Vertx vertx() {
    return vertx;
  }

  /**
   * Waits for a database future from a thread that may block (never an event loop). Failures come
   * back as they are when unchecked, wrapped otherwise.
   */
  public static <T> T await(Future<T> future) {
    return await(future, AWAIT_TIMEOUT);
  }

  /** The failure of a wait for the database that had no answer within {@code timeout}. */
  public static UncheckedIOException noAnswer(Duration timeout) {
    return new UncheckedIOException(
        new IOException("the database did not answer within " + timeout.toSeconds() + " s"));
  }

  public static <T> T await(Future<T> future, Duration timeout) {
    if (Context.isOnEventLoopThread()) {
      throw new IllegalStateException("blocking wait on a Vert.x event loop");
    }
    try {
      return future
          .toCompletionStage()
          .toCompletableFuture()
          .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while waiting for the database", e);
    } catch (TimeoutException e) {
      throw noAnswer(timeout);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException re) {
        throw re;
      }
      if (cause instanceof IOException io) {
        throw new UncheckedIOException(io);
      }
      if (cause instanceof Error err) {
        throw err;
      }
      throw new IllegalStateException(cause);
    }
  }

  /** The small pool of status reads (see {@link #READ_POOL_SIZE}). */
  public Pool readPool() {
    return readPool;
  }

  @Override
  public void close() {
    await(pool.close());
    await(readPool.close());
  }
}
