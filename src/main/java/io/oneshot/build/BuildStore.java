package io.oneshot.build;

import io.vertx.sqlclient.Pool;

/**
 * The stores of a build's life, one per part, each owning its SQL (one file per statement under
 * {@code src/main/resources/io/oneshot/build/sql/}, named after the store):
 *
 * <ul>
 *   <li>{@link #routeMirror()}: the configured routes and size caps, mirrored for the queue;
 *   <li>{@link #queue()}: enqueue, claim, cancel;
 *   <li>{@link #attempts()}: a claimed attempt's launch bookkeeping, requeue and end, and what the
 *       rescuer reads;
 *   <li>{@link #runner()}: provisionerd's acquire, heartbeat, logs and complete;
 *   <li>{@link #state()}: workspace state versions;
 *   <li>{@link #reads()}: builds, timelines, logs and routes for the API and the CLI;
 *   <li>{@link #retention()}: finished builds deleted when they are old;
 *   <li>{@link #sources()}: builds enqueued for jobs waiting at a queue source;
 *   <li>{@link #tokens()}: API tokens, their roles and the routes they cover;
 *   <li>{@link #audit()}: the audit trail;
 *   <li>{@link #warm()}: the counts and cost of the routes' warm room;
 *   <li>{@link #share()}: fair share between teams: holds, shares and use.
 * </ul>
 *
 * Each state change is one compare-and-set statement on the build's current status (and attempt,
 * token, runner); zero rows updated means another actor got there first, which callers treat as a
 * lost race, never as an error to retry.
 */
public final class BuildStore {
  private final Pool pool;
  private final RouteMirror routes;
  private final QueueStore queue;
  private final AttemptStore attempts;
  private final RunnerStore runner;
  private final StateStore state;
  private final BuildReads reads;
  private final RetentionStore retention;
  private final SourceStore sources;
  private final Sealer sealer;
  private final TokenStore tokens;
  private final AuditStore audit;
  private final WarmStore warm;
  private final ShareStore share;

  public BuildStore(Pool pool) {
    this(pool, pool, Sealer.NONE);
  }

  /**
   * {@code readPool}: for the status reads that must answer while builds keep {@code pool} busy;
   * {@code sealer}: encrypts workspace state and sensitive values at rest.
   */
  public BuildStore(Pool pool, Pool readPool, Sealer sealer) {
    this.pool = pool;
    this.sealer = sealer;
    this.tokens = new TokenStore(pool);
    this.audit = new AuditStore(pool);
    this.routes = new RouteMirror(pool);
    this.queue = new QueueStore(pool, sealer);
    this.attempts = new AttemptStore(pool);
    this.runner = new RunnerStore(pool, sealer);
    this.state = new StateStore(pool, sealer);
    this.reads = new BuildReads(pool, readPool);
    this.retention = new RetentionStore(pool);
    this.sources = new SourceStore(pool);
    this.warm = new WarmStore(pool);
    this.share = new ShareStore(pool, readPool);
  }

  /** Fair share between teams: holds on routes and teams, the teams' shares and use. */
  public ShareStore share() {
    return share;
  }

  /** Warm capacity: live builds and history to count balloons from, and what was counted. */
  public WarmStore warm() {
    return warm;
  }

  public Sealer sealer() {
    return sealer;
  }

  /** API tokens: their roles and scopes. */
  public TokenStore tokens() {
    return tokens;
  }

  /** The audit trail: who submitted, canceled or read what. */
  public AuditStore audit() {
    return audit;
  }

  public Pool pool() {
    return pool;
  }

  public RouteMirror routeMirror() {
    return routes;
  }

  public QueueStore queue() {
    return queue;
  }

  public AttemptStore attempts() {
    return attempts;
  }

  public RunnerStore runner() {
    return runner;
  }

  public StateStore state() {
    return state;
  }

  public BuildReads reads() {
    return reads;
  }

  public SourceStore sources() {
    return sources;
  }

  public RetentionStore retention() {
    return retention;
  }
}
