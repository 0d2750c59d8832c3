-- runner/complete for several runners at once (group commit, RunnerStore): one statement and one
-- commit for the completions that arrived together, none of them with a final state (a completion
-- with one is written alone, with its state, by runner/complete); each row names its call by its
-- place in the arrays (call, from 1). Transition: running -> succeeded|failed|canceled.
-- Guards, per call: token_hash = $1[i], status = 'running', runner_id = $7[i] (the bound runner of
-- the running attempt only). No two calls share a token (the caller keeps them apart).
-- "mine" locks the rows in id order before they change, as any other statement that locks several
-- builds does, so that two such statements cannot deadlock; its guards hold for the row it locked
-- (PostgreSQL checks them again on the newest version of a row it had to wait for).
-- Notifications as in runner/complete: after the commit, by the caller.
WITH after_commit AS MATERIALIZED (
  SELECT set_config('oneshot.wake', 'after-commit', true) AS wake
), i AS (
  SELECT * FROM unnest($1::bytea[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[],
                       $7::text[]) WITH ORDINALITY
    AS i(token_hash, status, exit_code, error, outputs, reason, runner_id, call)
), mine AS MATERIALIZED (
  SELECT x.id FROM oneshot.builds x JOIN i ON x.token_hash = i.token_hash
  WHERE x.status = 'running' AND x.runner_id = i.runner_id
  ORDER BY x.id
  FOR UPDATE OF x
)
UPDATE oneshot.builds x
SET status = i.status, finished_at = clock_timestamp(), exit_code = i.exit_code, error = i.error,
    outputs = i.outputs::jsonb, reason = i.reason
FROM after_commit, i, mine
WHERE x.id = mine.id AND x.token_hash = i.token_hash AND x.status = 'running'
  AND after_commit.wake IS NOT NULL
RETURNING i.call, x.id, x.attempt, x.status, x.route,
          extract(epoch FROM x.finished_at - x.started_at)::float8 AS ran
