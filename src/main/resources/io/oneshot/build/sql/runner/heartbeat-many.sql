-- runner/heartbeat for several runners at once (group commit, RunnerStore): one statement and one
-- commit for the heartbeats that arrived together, each with the answer runner/heartbeat gives it
-- alone; each row names its call by its place in the arrays (call, from 1). A call alone goes by
-- runner/heartbeat.
-- Transition: none. Guards, per call: token_hash = $1[i], status = 'running', runner_id = $2[i]
-- (the bound runner only). No two calls share a token (the caller keeps them apart).
-- How long a row another transaction holds is waited for ($3): briefly, as in runner/acquire-many;
-- past it the statement fails and its calls are written again alone.
-- The status guard names the statuses it excludes (the table's CHECK allows six), so that only the
-- token's unique index can find the rows: written as status = 'running', it let the planner join
-- the calls to a bitmap scan of builds_status and builds_live (every version of every running build
-- since the last vacuum: 10,000 index entries for 50 running builds in the drain) whenever the
-- table's statistics predated a burst (StalePlanTest).
WITH settings AS MATERIALIZED (
  SELECT set_config('lock_timeout', $3, true) AS lock_timeout
), i AS (
  SELECT * FROM unnest($1::bytea[], $2::text[]) WITH ORDINALITY AS i(token_hash, runner_id, call)
)
UPDATE oneshot.builds x SET heartbeat_at = clock_timestamp()
FROM settings, i
WHERE x.token_hash = i.token_hash
  AND x.status NOT IN ('pending', 'launching', 'succeeded', 'failed', 'canceled')
  AND x.runner_id = i.runner_id
  AND settings.lock_timeout IS NOT NULL
RETURNING i.call, x.cancel_requested_at IS NOT NULL AS cancel_requested
