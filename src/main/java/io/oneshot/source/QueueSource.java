package io.oneshot.source;

import io.oneshot.api.Json;
import io.oneshot.api.Metrics;
import io.oneshot.build.Database;
import io.oneshot.build.FencedOutException;
import io.oneshot.build.LeaderFence;
import io.oneshot.build.SourceStore;
import io.oneshot.config.Backoff;
import io.oneshot.config.OneshotConfig;
import io.oneshot.dispatch.Listener;
import io.oneshot.dispatch.LoopThread;
import io.vertx.core.Vertx;
import io.vertx.core.json.JsonObject;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowSet;
import io.vertx.sqlclient.data.Numeric;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One queue source: a database oneshot does not own, whose waiting jobs each get a build. It wakes
 * on its channel's NOTIFY (through a {@link Listener} that reconnects like the dispatcher's own),
 * on every change of oneshot's queue that may free a slot, and on its poll tick; each look runs the
 * source's read-only query, routes each tag set of waiting jobs, and tops every routed set up to as
 * many builds in flight as it has jobs waiting (under the sources lock, on the leader only).
 *
 * <p>A look that fails (the database unreachable, the query refused, a count that is not a whole
 * number) enqueues nothing for the whole source, marks it down in {@code /readyz} and the metrics,
 * and is tried again at the next wake or poll; the rest of the dispatcher is not affected.
 */
public final class QueueSource implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(QueueSource.class);

  /** At most this many jobs per tag set are believed: a larger count is a broken query. */
  static final long MAX_WAITING = 1_000_000;

  /**
   * The least time between two looks, so that a burst of wakes costs the source's database little.
   */
  private static final long MIN_GAP_MS = 50;

  /**
   * The jobs a Coder daemon would be handed, per organization and tag set: every job not started,
   * for the terraform provisioner ({@code coder provisioner start} serves only that type). That is
   * what {@code AcquireProvisionerJob} checks (coder/coder coderd/database/queries/
   * provisionerjobs.sql: {@code started_at IS NULL}, nothing of canceled_at or completed_at), so a
   * job canceled while queued (coderd/workspacebuilds.go, the cancel handler, leaves started_at
   * null) is taken too, and spends the daemon that takes it: it counts here as work, or the live
   * job behind it would wait one more launch. {@code canceled} says how many of them are such jobs.
   * A daemon takes, in its organization, the oldest job its tags satisfy, human-initiated before
   * prebuilds. The columns are those of {@code provisioner_jobs} and {@code organizations} in
   * coderd/database/dump.sql.
   */
  static final String CODER_QUERY =
      "SELECT j.organization_id::text AS organization, o.name AS organization_name,"
          + " j.tags::text AS tags, count(*) AS waiting,"
          + " count(*) FILTER (WHERE j.canceled_at IS NOT NULL) AS canceled"
          + " FROM provisioner_jobs j JOIN organizations o ON o.id = j.organization_id"
          + " WHERE j.started_at IS NULL AND j.provisioner = 'terraform'"
          + " GROUP BY 1, 2, 3";

  /**
   * The jobs a daemon took, oldest first, by Coder's own record: {@code worker_id} is its {@code
   * provisioner_daemons} row's id (AcquireProvisionerJob; UpsertProvisionerDaemon, keyed by name
   * and owner), in its organization. Parameters: the daemon's name, the organization id.
   */
  static final String CODER_JOBS_OF =
      "SELECT j.id::text AS id, j.job_status::text AS status, j.error, j.started_at,"
          + " j.canceled_at"
          + " FROM provisioner_daemons d JOIN provisioner_jobs j"
          + " ON j.worker_id = d.id AND j.organization_id = d.organization_id"
          + " WHERE d.name = $1 AND d.organization_id = $2::uuid"
          + " ORDER BY j.started_at";

  /**
   * Of these daemons (by name), those that hold or held a job, with it: the same join, by Coder's
   * index on (worker_id, organization_id, completed_at) and the daemons' unique name.
   */
  static final String CODER_TAKEN_BY =
      "SELECT d.name::text AS daemon, j.id::text AS job"
          + " FROM provisioner_daemons d JOIN provisioner_jobs j"
          + " ON j.worker_id = d.id AND j.organization_id = d.organization_id"
          + " WHERE d.name = ANY($1::text[])";

  private final OneshotConfig.Source source;
  private final OneshotConfig config;
  private final SourceStore store;
  private final Supplier<LeaderFence> fence;
  private final Metrics metrics;
  private final Pool pool;
  private final Listener listener;
  private final LoopThread loop;
  private final Set<String> unroutedWarned = ConcurrentHashMap.newKeySet();
  private final Set<String> heldWarned = ConcurrentHashMap.newKeySet();
  private volatile Status status;
  private volatile String lastError;

  /** Of the last look's jobs per tag set, those canceled in Coder while queued (coder only). */
  private volatile Map<Key, Long> canceled = Map.of();

  /**
   * One tag set as the last look found it; {@code route} null when no route of the source matches.
   */
  public record TagSet(
      Map<String, String> tags,
      String organization,
      String organizationName,
      String route,
      long waiting,
      long inFlight,
      long added) {}

  /**
   * What the last look found: {@code up} false with {@code error} when it failed; {@code leading}
   * false when this replica does not lead (only the leader looks).
   */
  public record Status(
      String name,
      String kind,
      boolean up,
      boolean leading,
      String error,
      Instant at,
      boolean listening,
      List<TagSet> tagSets) {}

  /**
   * @param fence the leadership this replica holds, null when it does not lead; a null supplier:
   *     looks always, unfenced (tests that drive one source without leadership)
   */
  public QueueSource(
      Vertx vertx,
      OneshotConfig.Source source,
      OneshotConfig config,
      SourceStore store,
      Supplier<LeaderFence> fence,
      Metrics metrics) {
    this.source = source;
    this.config = config;
    this.store = store;
    this.fence = fence;
    this.metrics = metrics;
    String app = "oneshot source " + source.name();
    this.pool = Database.foreignPool(vertx, source.url(), 1, app);
    this.loop = new LoopThread("oneshot-source-" + source.name());
    Backoff reconnect = config.database().reconnect();
    this.listener =
        new Listener(
            vertx,
            Database.optionsFor(source.url(), app + " listener"),
            Map.of(source.channel(), p -> wake()),
            this::wake,
            config.dispatch().listenerHealthInterval(),
            reconnect);
    this.status =
        new Status(source.name(), source.kind(), true, false, null, null, false, List.of());
  }

  public String name() {
    return source.name();
  }

  /** Whether this is a Coder source. */
  public boolean coder() {
    return source.coder();
  }

  public void start() {
    listener.start();
    loop.start(this::run);
    wake();
  }

  /** Asks for one more look; wakes during a look fold into one. */
  public void wake() {
    loop.wake();
  }

  public Status status() {
    Status s = status;
    return new Status(
        s.name(),
        s.kind(),
        s.up(),
        s.leading(),
        s.error(),
        s.at(),
        listener.listening(),
        s.tagSets());
  }

  private void run() {
    long poll = source.pollInterval().toMillis();
    while (loop.running()) {
      try {
        loop.await(poll);
        if (!loop.running()) {
          break;
        }
        look();
        Thread.sleep(MIN_GAP_MS);
      } catch (InterruptedException e) {
        break;
      }
    }
  }

  /**
   * One look: reads the waiting jobs, routes them, tops each routed tag set up. Public so that
   * tests can take one step at a time.
   */
  public Status look() {
    LeaderFence leading = fence == null ? null : fence.get();
    if (fence != null && leading == null) {
      return standby();
    }
    if (source.coder()) {
      try {
        markTakenByCoder();
      } catch (RuntimeException e) {
        return down("cannot read which daemons took jobs: " + describe(e));
      }
    }
    // The tag sets of this look, by key, with the builds that counted for them.
    Map<String, Looked> looked = new LinkedHashMap<>();
    List<TagSet> unrouted = new ArrayList<>();
    List<SourceStore.ToppedUp> done;
    try {
      done =
          Database.await(
              store.topUp(
                  source.name(),
                  source.failureHold(),
                  leading,
                  flights ->
                      pool.withTransaction(
                              c ->
                                  c.query("SET TRANSACTION READ ONLY")
                                      .execute()
                                      .compose(x -> c.query(query()).execute()))
                          .map(
                              rows -> {
                                List<SourceStore.Waiting> routed = new ArrayList<>();
                                for (Map.Entry<Key, Long> e : waiting(rows).entrySet()) {
                                  Key k = e.getKey();
                                  SourceStore.Flight f =
                                      flights.getOrDefault(
                                          Json.tree(k.json()), SourceStore.Flight.NONE);
                                  looked.put(k.json(), new Looked(k, f));
                                  route(k, e.getValue(), f, routed, unrouted);
                                }
                                return routed;
                              })));
    } catch (BadRowException e) {
      return down(e.getMessage());
    } catch (FencedOutException e) {
      return standby();
    } catch (RuntimeException e) {
      return down(describe(e));
    }
    List<TagSet> sets = new ArrayList<>(unrouted);
    for (SourceStore.ToppedUp t : done) {
      SourceStore.Waiting w = t.waiting();
      Key k = looked.get(w.key()).key();
      SourceStore.Flight f = looked.get(w.key()).flight();
      sets.add(
          new TagSet(
              k.tags(),
              k.organization(),
              k.organizationName(),
              w.route(),
              w.waiting(),
              f.counted(),
              t.added()));
      if (t.added() > 0) {
        metrics.sourceEnqueued(source.name(), w.route(), t.added());
        log.info(
            "Source {}: {} {} waiting with tags {}{}, {} in flight: enqueued {} on route {}.",
            source.name(),
            w.waiting(),
            w.waiting() == 1 ? "job" : "jobs",
            Json.write(k.tags()),
            k.organization() == null ? "" : " in organization " + k.organizationName(),
            f.inFlight(),
            t.added(),
            w.route());
      }
      if (f.held() > 0 && t.added() == 0 && f.inFlight() < w.waiting() && heldWarned.add(w.key())) {
        log.warn(
            "Source {}: {} {} with tags {} ended without taking a job in the last {}; their"
                + " jobs get new builds when that has passed. Read those builds' logs"
                + " (oneshot builds list --route {}).",
            source.name(),
            f.held(),
            f.held() == 1 ? "build" : "builds",
            Json.write(k.tags()),
            io.oneshot.config.Units.format(source.failureHold()),
            w.route());
      } else if (f.held() == 0) {
        heldWarned.remove(w.key());
      }
    }
    if (lastError != null) {
      log.info("Source {}: its look succeeds again.", source.name());
      lastError = null;
    }
    status =
        new Status(
            source.name(),
            source.kind(),
            true,
            true,
            null,
            Instant.now(),
            false,
            List.copyOf(sets));
    return status;
  }

  /**
   * Marks the running builds whose daemons Coder's tables say took a job, which their own reports
   * did not (a report that reached a dispatcher as it died, a daemon whose signs provisionerd
   * missed): they stop counting as in flight, so that the jobs behind them get builds now, not when
   * those builds end.
   */
  private void markTakenByCoder() {
    List<SourceStore.Unmarked> unmarked = Database.await(store.unmarked(source.name()));
    if (unmarked.isEmpty()) {
      return;
    }
    Map<String, SourceStore.Unmarked> byDaemon = new LinkedHashMap<>();
    for (SourceStore.Unmarked u : unmarked) {
      byDaemon.put(CoderOutcome.daemonName(u.id(), u.attempt()), u);
    }
    RowSet<Row> rows =
        Database.await(
            pool.preparedQuery(CODER_TAKEN_BY)
                .execute(io.vertx.sqlclient.Tuple.of(byDaemon.keySet().toArray(new String[0]))));
    for (Row r : rows) {
      SourceStore.Unmarked u = byDaemon.remove(r.getString("daemon"));
      if (u != null
          && Database.await(
              store.markTaken(
                  u.id(),
                  u.attempt(),
                  "took Coder job " + r.getString("job") + ", as Coder's tables say"))) {
        log.info(
            "Source {}: build {} took Coder job {}, as Coder's tables say (its own report did not"
                + " come).",
            source.name(),
            u.id(),
            r.getString("job"));
      }
    }
  }

  /** This replica does not lead: the leader alone looks at sources. */
  private Status standby() {
    status =
        new Status(
            source.name(), source.kind(), true, false, null, Instant.now(), false, List.of());
    return status;
  }

  private Status down(String error) {
    if (!error.equals(lastError)) {
      log.warn(
          "Source {}: {}. Nothing is enqueued for it until a look succeeds; trying again at its"
              + " next wake or poll (every {}).",
          source.name(),
          error,
          io.oneshot.config.Units.format(source.pollInterval()));
    }
    lastError = error;
    status =
        new Status(
            source.name(),
            source.kind(),
            false,
            true,
            error,
            Instant.now(),
            false,
            status.tagSets());
    return status;
  }

  private static String describe(Throwable e) {
    Throwable t = e.getCause() != null && e.getMessage() == null ? e.getCause() : e;
    String msg = t.getMessage();
    return msg == null ? t.getClass().getSimpleName() : msg;
  }

  private String query() {
    return source.coder() ? CODER_QUERY : source.query();
  }

  /** A tag set of waiting jobs; {@code organization} (id) and its name for coder sources only. */
  record Key(Map<String, String> tags, String organization, String organizationName) {
    String json() {
      Map<String, Object> k = new TreeMap<>();
      k.put("tags", new TreeMap<>(tags));
      if (organization != null) {
        k.put("organization", organization);
      }
      return Json.write(k);
    }
  }

  /** A tag set a look found, with the builds that counted for it before the look. */
  private record Looked(Key key, SourceStore.Flight flight) {}

  /** A row the source's query returned that cannot be believed. */
  static final class BadRowException extends RuntimeException {
    BadRowException(String message) {
      super(message);
    }
  }

  /** The waiting jobs per tag set; rows of the same tag set add up. */
  private Map<Key, Long> waiting(RowSet<Row> rows) {
    List<String> columns = rows.columnsNames();
    if (!columns.contains("tags") || !columns.contains("waiting")) {
      throw new BadRowException(
          "its query must return the columns tags and waiting; it returned " + columns);
    }
    Map<Key, Long> out = new LinkedHashMap<>();
    boolean withCanceled = columns.contains("canceled");
    Map<Key, Long> canceledNow = new java.util.HashMap<>();
    for (Row r : rows) {
      Map<String, String> tags = tags(r.getValue("tags"));
      long n = count(r.getValue("waiting"), tags);
      Key k =
          source.coder()
              ? new Key(tags, r.getString("organization"), r.getString("organization_name"))
              : new Key(tags, null, null);
      out.merge(k, n, Long::sum);
      if (withCanceled && r.getValue("canceled") != null) {
        canceledNow.merge(k, count(r.getValue("canceled"), tags), Long::sum);
      }
    }
    canceled = canceledNow;
    return out;
  }

  private static Map<String, String> tags(Object v) {
    JsonObject o;
    if (v == null) {
      return Map.of();
    } else if (v instanceof JsonObject j) {
      o = j;
    } else if (v instanceof String s) {
      try {
        o = new JsonObject(s);
      } catch (RuntimeException e) {
        throw new BadRowException("its query returned tags that are not a JSON object: " + s);
      }
    } else {
      throw new BadRowException(
          "its query returned tags of type "
              + v.getClass().getSimpleName()
              + "; tags must be a JSON object of strings (json, jsonb or text)");
    }
    Map<String, String> out = new TreeMap<>();
    for (Map.Entry<String, Object> e : o) {
      if (!(e.getValue() instanceof String s)) {
        throw new BadRowException(
            "its query returned tags " + o.encode() + ": tag values must be strings");
      }
      out.put(e.getKey(), s);
    }
    return out;
  }

  private static long count(Object v, Map<String, String> tags) {
    long n;
    if (v instanceof Long || v instanceof Integer || v instanceof Short) {
      n = ((Number) v).longValue();
    } else if (v instanceof Numeric num && num.bigDecimalValue() != null) {
      try {
        n = num.bigDecimalValue().longValueExact();
      } catch (ArithmeticException e) {
        throw new BadRowException(
            "its query returned waiting "
                + num
                + " for tags "
                + Json.write(tags)
                + ": not a whole number");
      }
    } else {
      throw new BadRowException(
          "its query returned waiting "
              + (v == null ? "null" : v + " (" + v.getClass().getSimpleName() + ")")
              + " for tags "
              + Json.write(tags)
              + ": it must be a whole number of jobs");
    }
    if (n < 0 || n > MAX_WAITING) {
      throw new BadRowException(
          "its query returned waiting "
              + n
              + " for tags "
              + Json.write(tags)
              + ": it must be from 0 to "
              + MAX_WAITING);
    }
    return n;
  }

  /** Routes one tag set to the first of the source's routes that takes it. */
  private void route(
      Key k,
      long n,
      SourceStore.Flight counted,
      List<SourceStore.Waiting> routed,
      List<TagSet> unrouted) {
    for (OneshotConfig.Feed f : source.feeds()) {
      OneshotConfig.Route r = config.route(f.route()).orElse(null);
      if (r == null) {
        continue;
      }
      boolean match =
          source.coder()
              ? (f.organization().equals(k.organization())
                      || f.organization().equals(k.organizationName()))
                  && TagRules.coder(r.tags(), k.tags())
              : TagRules.oneshot(r.tags(), r.untagged(), k.tags());
      if (match) {
        unroutedWarned.remove(k.json());
        routed.add(
            new SourceStore.Waiting(
                k.json(),
                r.name(),
                n,
                counted.counted(),
                Json.write(k.tags()),
                input(k),
                reason(k, n)));
        return;
      }
    }
    unrouted.add(new TagSet(k.tags(), k.organization(), k.organizationName(), null, n, 0, 0));
    if (n > 0 && unroutedWarned.add(k.json())) {
      log.warn(
          "Source {}: {} {} waiting with tags {}{}, and no route of this source takes them; they"
              + " wait until one does. Routes: {}.",
          source.name(),
          n,
          n == 1 ? "job" : "jobs",
          Json.write(k.tags()),
          k.organization() == null
              ? ""
              : " in organization " + k.organization() + " (" + k.organizationName() + ")",
          describeFeeds());
    }
  }

  private String describeFeeds() {
    List<String> out = new ArrayList<>();
    for (OneshotConfig.Feed f : source.feeds()) {
      OneshotConfig.Route r = config.route(f.route()).orElse(null);
      String tags = r == null ? "?" : Json.write(new TreeMap<>(r.tags()));
      out.add(
          f.route()
              + " "
              + tags
              + (f.organization() == null ? "" : " (organization " + f.organization() + ")"));
    }
    return String.join(", ", out);
  }

  private String input(Key k) {
    if (!source.coder()) {
      return source.input();
    }
    Map<String, Object> in = new LinkedHashMap<>();
    in.put("provisioner", "coder");
    in.put("source", source.name());
    in.put("organization", k.organization());
    in.put("tags", new TreeMap<>(k.tags()));
    in.put("idleTimeoutMs", source.idleTimeout().toMillis());
    return Json.write(in);
  }

  private String reason(Key k, long n) {
    long gone = canceled.getOrDefault(k, 0L);
    return "enqueued by source "
        + source.name()
        + ": "
        + n
        + (n == 1 ? " job waits" : " jobs wait")
        + (gone == 0
            ? ""
            : " ("
                + gone
                + " of them canceled in Coder while queued: Coder still hands such a job to the"
                + " next daemon, which it spends)")
        + " with tags "
        + Json.write(k.tags())
        + (k.organization() == null ? "" : " in organization " + k.organizationName());
  }

  /**
   * What Coder's tables say became of the job {@code daemon} took in {@code organization}; empty
   * when it took none. Read-only, on this source's connection to Coder's database.
   */
  public io.vertx.core.Future<java.util.Optional<CoderOutcome>> outcomeOf(
      String daemon, String organization) {
    return pool.preparedQuery(CODER_JOBS_OF)
        .execute(io.vertx.sqlclient.Tuple.of(daemon, organization))
        .map(
            rows -> {
              List<CoderOutcome.Job> jobs = new ArrayList<>();
              for (Row r : rows) {
                jobs.add(
                    new CoderOutcome.Job(
                        r.getString("id"),
                        r.getString("status"),
                        r.getString("error"),
                        r.getOffsetDateTime("started_at"),
                        r.getOffsetDateTime("canceled_at")));
              }
              return CoderOutcome.of(daemon, jobs);
            });
  }

  @Override
  public void close() {
    loop.close();
    listener.close();
    pool.close();
  }
}
