-- runner/complete for several runners at once (group commit, RunnerStore): one statement and one
-- commit for the completions that arrived together, none of them with a final state, each with the
-- answer runner/complete gives it alone; each row names its call by its place in the arrays (call,
-- from 1). A call alone goes by runner/complete, whose plan costs PostgreSQL less.
-- Transition: running -> succeeded|failed|canceled.
-- Guards, per call: token_hash = $1[i], status = 'running', runner_id = $7[i] (the bound runner of
-- the running attempt only). No two calls share a token (the caller keeps them apart).
-- How long a row another transaction holds is waited for ($8): briefly, as in
-- runner/acquire-many; so two such statements that lock the same rows in different orders never
-- wait on each other for long: one fails and its calls are written again alone.
-- Its notifications are sent once it committed (runner/wake.sql; db/009_wakes.sql says why): the
-- transition's trigger leaves this transaction's changes alone (oneshot.events, below), so none
-- goes out from the transaction itself.
-- The status guard names the statuses it excludes (the table's CHECK allows six), so that only the
-- token's unique index can find the rows: written as status = 'running', it let the planner join
-- the calls to a bitmap scan of builds_status and builds_live (every version of every running build
-- since the last vacuum: 10,000 index entries for 50 running builds in the drain) whenever the
-- table's statistics predated a burst (StalePlanTest).
WITH after_commit AS MATERIALIZED (
  SELECT set_config('lock_timeout', $8, true) AS lock_timeout,
         -- The timeline's rows are written here ("timeline"), one INSERT for all the calls; the
         -- transition's trigger, and with it its notifications, leaves them out
         -- (db/013_statement_events.sql).
         set_config('oneshot.events', 'written', true) AS events
), i AS (
  SELECT * FROM unnest($1::bytea[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[],
                       $7::text[], $9::text[]) WITH ORDINALITY
    AS i(token_hash, status, exit_code, error, outputs, reason, runner_id, usage, call)
), ended AS (
  UPDATE oneshot.builds x
  SET status = i.status, finished_at = clock_timestamp(), exit_code = i.exit_code, error = i.error,
      outputs = i.outputs::jsonb, reason = i.reason, usage = i.usage::jsonb
  FROM after_commit, i
  WHERE x.token_hash = i.token_hash
    AND x.status NOT IN ('pending', 'launching', 'succeeded', 'failed', 'canceled')
    AND x.runner_id = i.runner_id
    AND after_commit.lock_timeout IS NOT NULL AND after_commit.events IS NOT NULL
  RETURNING i.call, x.id, x.attempt, x.status, x.route, x.reason,
            extract(epoch FROM x.finished_at - x.started_at)::float8 AS ran
), timeline AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT id, attempt, 'running', status, reason FROM ended ORDER BY id
)
SELECT call, id, attempt, status, route, ran FROM ended
