-- Claim, step 2: for every route with free slots, its next pending builds by priority then age, within
-- the global limit ($1) and the tokens at hand ($2), skipping builds whose workspace has an earlier
-- build unfinished. The caller holds the claim lock, so the counts include every earlier claim.
-- Transition: pending -> launching, attempt + 1, a new token hash, runner binding cleared.
-- Guards: status = 'pending' under FOR UPDATE SKIP LOCKED; the route's maxConcurrent; the global
-- limit; one live build per workspace. {{batch}}: the number of tokens, a constant for the planner.
-- The timeline's rows are written here, one INSERT for the batch (db/013_statement_events.sql):
-- "events" tells the transition's trigger so before any row changes, and this statement is the
-- last of the claim's transaction.
WITH events AS MATERIALIZED (
  SELECT set_config('oneshot.events', 'written', true) AS written
), live AS (
  SELECT route, count(*)::int AS n FROM oneshot.builds
  WHERE status IN ('launching', 'running') GROUP BY route
), room AS (
  -- What this claim may take in all: the global limit's free slots, and no more builds
  -- than it has tokens for. No route is read (or locked) past it, however deep its queue.
  SELECT least(greatest($1 - (SELECT coalesce(sum(n), 0) FROM live), 0),
               cardinality($2::bytea[])) AS n
), free AS (
  SELECT r.name,
         least(greatest(r.max_concurrent - coalesce(l.n, 0), 0), (SELECT n FROM room)) AS slots
  FROM oneshot.routes r LEFT JOIN live l ON l.route = r.name
), candidates AS (
  SELECT c.id, c.priority
  FROM free f CROSS JOIN LATERAL (
    SELECT b.id, b.priority FROM oneshot.builds b
    WHERE b.status = 'pending' AND b.route = f.name
      AND (b.workspace IS NULL OR NOT EXISTS (
        SELECT 1 FROM oneshot.builds w
        WHERE w.workspace = b.workspace AND w.id < b.id
          AND w.status IN ('pending', 'launching', 'running')))
    ORDER BY b.priority DESC, b.id
    LIMIT f.slots
    FOR UPDATE OF b SKIP LOCKED
  ) c
  WHERE f.slots > 0
), picked AS (
  -- The constant outer limit (the claim's batch size) tells the planner how few rows come
  -- out, so that the update below finds them by primary key even over a deep queue.
  SELECT * FROM (
    SELECT id, row_number() OVER (ORDER BY priority DESC, id)::int AS n
    FROM candidates
    ORDER BY priority DESC, id
    LIMIT (SELECT n FROM room)
  ) x LIMIT {{batch}}
), claimed AS (
  UPDATE oneshot.builds b
  SET status = 'launching', attempt = b.attempt + 1, claimed_at = clock_timestamp(),
      started_at = NULL, heartbeat_at = NULL, runner_log_seq = 0,
      state_read_version = NULL, launch_pod = NULL,
      runner_id = NULL, runner = NULL, runner_since = NULL,
      launch_kind = $3,
      launch_name = 'oneshot-' || b.id || '-' || (b.attempt + 1),
      token_hash = ($2::bytea[])[p.n], reason = 'claimed by the dispatcher'
  FROM picked p, events
  WHERE b.id = p.id AND events.written IS NOT NULL
  RETURNING b.id, b.attempt, b.route, b.launch_name, b.reason, p.n,
            extract(epoch FROM b.claimed_at - b.created_at)::float8 AS wait
), timeline AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT id, attempt, 'pending', 'launching', reason FROM claimed ORDER BY id
)
-- In the order the builds launch (priority, then age): UPDATE ... RETURNING answers in the table's
-- order, and the dispatcher starts its launches in the order it reads here.
SELECT id, attempt, route, launch_name, n, wait FROM claimed ORDER BY n
