-- provisionerd's outcome, for one runner or several at once (group commit, RunnerStore): one
-- statement and one commit for the completions that arrived together, each with the answer it
-- would get alone; each row names its call by its place in the arrays (call, from 1). A final state,
-- when sent, is stored first in the same transaction (state/save).
-- Transition: running -> succeeded|failed|canceled.
-- Guards, per call: token_hash = $1[i], status = 'running', runner_id = $7[i] (the bound runner of
-- the running attempt only; anything else is answered from runner/token-state). No two calls share
-- a token (the caller keeps them apart).
-- "mine" locks the rows in id order before they change, as any other statement that locks several
-- builds does, so that two such statements cannot deadlock; its guards hold for the row it locked
-- (PostgreSQL checks them again on the newest version of a row it had to wait for).
-- Its notifications are sent once it committed (runner/wake.sql; db/009_wakes.sql says why): the
-- setting lasts to the end of this transaction, so the transition's trigger leaves them out.
WITH after_commit AS MATERIALIZED (
  SELECT set_config('oneshot.wake', 'after-commit', true) AS wake,
         -- How long a row another transaction holds is waited for ($8): as in runner/acquire.
         set_config('lock_timeout', $8, true) AS lock_timeout
), i AS (
  SELECT * FROM unnest($1::bytea[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[],
                       $7::text[]) WITH ORDINALITY
    AS i(token_hash, status, exit_code, error, outputs, reason, runner_id, call)
), mine AS MATERIALIZED (
  SELECT x.id, i.call FROM oneshot.builds x, i, after_commit
  WHERE x.token_hash = i.token_hash AND x.status = 'running' AND x.runner_id = i.runner_id
    AND after_commit.lock_timeout IS NOT NULL
  ORDER BY x.id
  FOR UPDATE OF x
)
UPDATE oneshot.builds x
SET status = i.status, finished_at = clock_timestamp(), exit_code = i.exit_code, error = i.error,
    outputs = i.outputs::jsonb, reason = i.reason
FROM after_commit, i, mine
WHERE x.id = mine.id AND i.call = mine.call AND after_commit.wake IS NOT NULL
RETURNING mine.call, x.id, x.attempt, x.status, x.route,
          extract(epoch FROM x.finished_at - x.started_at)::float8 AS ran
