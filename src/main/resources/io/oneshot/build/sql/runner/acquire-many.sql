-- runner/acquire for several runners at once (group commit, RunnerStore): one statement and one
-- commit for the acquires that arrived together, each with the answer runner/acquire gives it
-- alone; each row names its call by its place in the arrays (call, from 1). A call alone goes by
-- runner/acquire, whose plan costs PostgreSQL less (about 0.1 ms of CPU a build in the drain).
-- Transition: launching -> running (first acquire); running -> running (repeat).
-- Guards, per call: token_hash = $1[i] with status IN ('launching', 'running'); runner_id IS NULL
-- OR runner_id = $2[i] (one attempt, one runner); id = $5[i] AND attempt = $6[i] when given (the
-- runner proven to be the one launched for that attempt, as in runner/acquire). No two calls share a token (the caller keeps
-- them apart), so each row is locked and changed for one call only.
-- Rows are locked in id order, as any other statement that locks several builds does, so that two
-- such statements cannot deadlock; FOR NO KEY UPDATE, as runner/acquire, so as not to wait for a
-- launch record written at the same moment.
-- The status guard names the statuses it excludes (the table's CHECK allows six), so that only the
-- token's unique index can find the rows: written as status IN ('launching', 'running'), it let the
-- planner join the calls to a bitmap scan of builds_live (every version of every live build since
-- the last vacuum: 10,000 index entries for 50 running builds in the drain) whenever the table's
-- statistics predated a burst (StalePlanTest).
WITH waits AS MATERIALIZED (
  -- How long a row another transaction holds is waited for ($4): briefly, so that one held row
  -- does not hold up the other calls (the statement fails, and the caller writes each call again
  -- alone, waiting as long as it takes).
  SELECT set_config('lock_timeout', $4, true) AS lock_timeout,
         -- The first acquires' timeline rows are written here ("timeline"), one INSERT for all of
         -- them; the transition's trigger leaves them out (db/013_statement_events.sql).
         set_config('oneshot.events', 'written', true) AS events
), i AS (
  SELECT * FROM unnest($1::bytea[], $2::text[], $3::text[], $5::bigint[], $6::int[])
    WITH ORDINALITY AS i(token_hash, runner_id, runner, proven_build, proven_attempt, call)
), old AS (
  SELECT x.id, x.attempt, x.route, x.status, x.runner_id, x.runner::text AS runner,
         x.runner_since, i.call, i.runner_id AS caller, i.runner AS caller_runner
  FROM oneshot.builds x, i, waits
  WHERE x.token_hash = i.token_hash
    AND x.status NOT IN ('pending', 'succeeded', 'failed', 'canceled')
    AND (i.proven_build IS NULL OR (x.id = i.proven_build AND x.attempt = i.proven_attempt))
    AND waits.lock_timeout IS NOT NULL AND waits.events IS NOT NULL
  ORDER BY x.id
  FOR NO KEY UPDATE OF x
), b AS (
  UPDATE oneshot.builds x
  SET status = 'running', started_at = coalesce(x.started_at, clock_timestamp()),
      heartbeat_at = clock_timestamp(),
      runner_id = old.caller, runner = coalesce(x.runner, old.caller_runner::jsonb),
      runner_since = coalesce(x.runner_since, clock_timestamp()),
      reason = CASE WHEN x.status = 'launching' THEN 'acquired by provisionerd' ELSE x.reason END,
      state_read_version =
        CASE WHEN x.workspace IS NULL OR x.input->>'provisioner' NOT IN ('terraform', 'pulumi') THEN NULL
             ELSE coalesce(x.state_read_version,
                           (SELECT max(w.version) FROM oneshot.workspace_states w
                            WHERE w.route = x.route AND w.workspace = x.workspace), 0) END
  FROM old
  WHERE x.id = old.id AND (x.runner_id IS NULL OR x.runner_id = old.caller)
  RETURNING x.id, x.attempt, x.route, x.workspace, x.input::text AS input, x.sealed,
            x.cancel_requested_at IS NOT NULL AS cancel_requested, x.state_read_version,
            old.status = 'launching' AS first,
            extract(epoch FROM x.started_at - (SELECT l.launched_at FROM oneshot.build_launches l
                                                 WHERE l.build_id = x.id AND l.attempt = x.attempt)
                    )::float8 AS start_seconds
), timeline AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT id, attempt, 'launching', 'running', 'acquired by provisionerd' FROM b
  WHERE first ORDER BY id
)
SELECT old.call,
       old.id AS held_id, old.attempt AS held_attempt, old.route AS held_route,
       old.runner_id AS held_by, old.runner AS held_runner, old.runner_since AS held_since,
       b.*, coalesce(r.timeout_ms, 3600000) AS timeout_ms,
       coalesce(r.cancel_grace_ms, 60000) AS cancel_grace_ms, w.state
FROM old
LEFT JOIN b ON b.id = old.id
LEFT JOIN oneshot.routes r ON r.name = b.route
LEFT JOIN oneshot.workspace_states w
  ON w.route = b.route AND w.workspace = b.workspace AND w.version = b.state_read_version
