package io.oneshot.bench;

import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.awaitility.Awaitility;

/** What the scenarios share: producers that note their commits, waiting, the builds' timelines. */
final class Harness {
  private Harness() {}

  /**
   * The builds with their current attempt's launch time ({@code launched_at}, from
   * oneshot.build_launches), for the conditions and times the scenarios read.
   */
  static final String BUILDS =
      "(SELECT b.*, l.launched_at FROM oneshot.builds b LEFT JOIN oneshot.build_launches l"
          + " ON l.build_id = b.id AND l.attempt = b.attempt) b";

  static final String SCRIPT_INPUT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";

  /** Waits until {@code done}, looking every 20 ms, or fails after {@code limit}. */
  static void await(String what, Duration limit, BooleanSupplier done) {
    Awaitility.await(what)
        .atMost(limit)
        .pollDelay(Duration.ZERO)
        .pollInterval(Duration.ofMillis(20))
        .until(done::getAsBoolean);
  }

  /**
   * Waits until every build with an id in [ids[0], ids[1]] satisfies {@code condition} (SQL over
   * {@link #BUILDS}, e.g. {@code launched_at IS NOT NULL}). One connection for the whole wait: a
   * new one every 20 ms is a backend started each time, which took CPU from what is measured.
   */
  static void awaitBuilds(long[] ids, String condition, Duration limit) {
    try (Connection c = Sql.connect();
        PreparedStatement st =
            c.prepareStatement(
                "SELECT count(*) FROM "
                    + BUILDS
                    + " WHERE id BETWEEN ? AND ? AND NOT ("
                    + condition
                    + ")")) {
      st.setLong(1, ids[0]);
      st.setLong(2, ids[1]);
      await(
          "every build " + condition,
          limit,
          () -> {
            try (ResultSet r = st.executeQuery()) {
              r.next();
              return r.getLong(1) == 0;
            } catch (SQLException e) {
              throw new IllegalStateException(e);
            }
          });
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * A burst of {@code n} builds enqueued in one statement, on a dispatcher that leads: seconds from
   * its commit to the last launch recorded.
   */
  static double burstSeconds(TestServer t, int n) {
    return burstSeconds(t, n, () -> {});
  }

  /**
   * {@link #burstSeconds(TestServer, int)}, running {@code atCommit} once the burst's enqueue
   * committed, where the time starts.
   */
  static double burstSeconds(TestServer t, int n, Runnable atCommit) {
    awaitLeader(t);
    try (Producer p = new Producer()) {
      long before = t.server.metrics().launches(Setups.ROUTE);
      long[] ids = p.burst(n);
      atCommit.run();
      Instant committed = p.answered.get(ids[0]);
      // Counted in memory (the dispatcher's own count of recorded launches): a count over the
      // builds every 20 ms took the database's CPU from the launches it measured.
      await(
          "every build launched",
          Duration.ofMinutes(10),
          () -> t.server.metrics().launches(Setups.ROUTE) - before >= n);
      return Duration.between(committed, latest(ids, "launched_at")).toNanos() / 1e9;
    }
  }

  /** The latest of a timestamp column over the builds with an id in [ids[0], ids[1]]. */
  static Instant latest(long[] ids, String column) {
    return micros(
        Sql.value(
            "SELECT extract(epoch FROM max("
                + column
                + ")) * 1e6 FROM "
                + BUILDS
                + " WHERE id BETWEEN ? AND ?",
            ids[0],
            ids[1]));
  }

  static void awaitLeader(TestServer t) {
    await("the dispatcher leads", Duration.ofSeconds(30), t.server::leader);
  }

  /** Sleeps until the given instant of {@link System#nanoTime()}. */
  static void sleepUntil(long nanos) {
    long d;
    while ((d = nanos - System.nanoTime()) > 0) {
      LockSupport.parkNanos(d);
    }
  }

  /** Milliseconds from {@code from} to {@code to}. */
  static double ms(Instant from, Instant to) {
    return Duration.between(from, to).toNanos() / 1e6;
  }

  /** Builds' timestamps (wall clock of the database host), by id, for ids in [first, last]. */
  record Times(
      Instant created, Instant claimed, Instant launched, Instant started, Instant finished) {}

  static Map<Long, Times> times(long first, long last) {
    Map<Long, Times> out = new HashMap<>();
    for (Map<String, Object> r :
        Sql.rows(
            """
            SELECT id, extract(epoch FROM created_at) * 1e6 AS created,
                   extract(epoch FROM claimed_at) * 1e6 AS claimed,
                   extract(epoch FROM launched_at) * 1e6 AS launched,
                   extract(epoch FROM started_at) * 1e6 AS started,
                   extract(epoch FROM finished_at) * 1e6 AS finished
            FROM %s WHERE id BETWEEN ? AND ?
            """
                .formatted(BUILDS),
            first,
            last)) {
      out.put(
          ((Number) r.get("id")).longValue(),
          new Times(
              micros(r.get("created")),
              micros(r.get("claimed")),
              micros(r.get("launched")),
              micros(r.get("started")),
              micros(r.get("finished"))));
    }
    return out;
  }

  static Instant micros(Object v) {
    if (v == null) {
      return null;
    }
    long us = Math.round(((Number) v).doubleValue());
    return Instant.ofEpochSecond(us / 1_000_000, (us % 1_000_000) * 1000);
  }

  /**
   * A producer on its own connection that calls {@code oneshot.enqueue()} (autocommit) and notes
   * when each build was committed.
   *
   * <p>Two moments bound the commit: the end of the enqueue's statement on the database's clock,
   * read by the statement itself just before its commit ({@link #statementEnd}), and the moment its
   * answer reached the producer ({@link #answered}). The answer is the commit as the producer sees
   * it, and the moment used ({@link #committedBefore}), unless it comes after what it is measured
   * to: the server notifies the dispatcher before it answers the producer, and a producer thread
   * held up by a busy machine once made claims appear 3 ms before their commit. Then the
   * statement's end stands in, which is before the commit (by the commit's own flush): a latency
   * measured from it is never short.
   */
  static final class Producer implements AutoCloseable {
    /** Each build's statement end ({@link Instant} on the database's clock). */
    final Map<Long, Instant> statementEnd = new ConcurrentHashMap<>();

    /** Each build's answer, as it reached the producer. */
    final Map<Long, Instant> answered = new ConcurrentHashMap<>();

    /** The same two moments on {@link System#nanoTime}'s clock, for what the dispatcher notes. */
    private final Map<Long, long[]> nanos = new ConcurrentHashMap<>();

    /**
     * The build's commit for a latency to {@code seen}: its answer, unless that came after {@code
     * seen}, else the end of its statement.
     */
    Instant committedBefore(long id, Instant seen) {
      Instant a = answered.get(id);
      return a == null || (seen != null && a.isAfter(seen)) ? statementEnd.get(id) : a;
    }

    /** {@link #committedBefore} on {@link System#nanoTime}'s clock; null when not noted. */
    Long committedNanosBefore(long id, long seen) {
      long[] n = nanos.get(id);
      return n == null ? null : n[1] <= seen ? n[1] : n[0];
    }

    private final Connection c;
    private final PreparedStatement one;
    private final PreparedStatement many;

    Producer() {
      try {
        c = Sql.connect();
        one =
            c.prepareStatement(
                "SELECT id, extract(epoch FROM clock_timestamp()) * 1e6"
                    + " FROM oneshot.enqueue(?::jsonb, ?::jsonb, 0, ?)");
        many =
            c.prepareStatement(
                "SELECT min((b).id), max((b).id), extract(epoch FROM clock_timestamp()) * 1e6"
                    + " FROM (SELECT oneshot.enqueue(?::jsonb, ?::jsonb) AS b"
                    + " FROM generate_series(1, ?)) x");
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    }

    /** Enqueues one build; returns its id. */
    long enqueue(String tags, String input, String workspace) {
      try {
        one.setString(1, tags);
        one.setString(2, input);
        one.setString(3, workspace);
        try (ResultSet rs = one.executeQuery()) {
          rs.next();
          long id = rs.getLong(1);
          note(id, micros(rs.getDouble(2)));
          return id;
        }
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    }

    long enqueue() {
      return enqueue("{}", SCRIPT_INPUT, null);
    }

    /** Notes a build's statement end and answer (now), also on {@link System#nanoTime}'s clock. */
    private void note(long id, Instant statement) {
      long now = System.nanoTime();
      Instant answer = Instant.now();
      nanos.put(id, new long[] {now - Duration.between(statement, answer).toNanos(), now});
      statementEnd.put(id, statement);
      answered.put(id, answer);
    }

    /** Enqueues n builds in one statement; returns [first id, last id] and notes the commit. */
    long[] burst(int n) {
      try {
        many.setString(1, "{}");
        many.setString(2, SCRIPT_INPUT);
        many.setInt(3, n);
        try (ResultSet rs = many.executeQuery()) {
          rs.next();
          long[] ids = {rs.getLong(1), rs.getLong(2)};
          Instant at = micros(rs.getDouble(3));
          note(ids[0], at);
          note(ids[1], at);
          return ids;
        }
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    }

    @Override
    public void close() {
      try {
        c.close();
      } catch (SQLException e) {
        // closing anyway
      }
    }
  }

  static List<Double> list() {
    return java.util.Collections.synchronizedList(new java.util.ArrayList<>());
  }
}
