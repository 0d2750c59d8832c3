-- provisionerd's outcome, with what the build met of its pod's limits ($8, db/018). The final state, when sent, is stored first in the same transaction
-- (state/save). Transition: running -> succeeded|failed|canceled.
-- Guards: token_hash = $1, status = 'running', runner_id = $7 (the bound runner of the running
-- attempt only; anything else is answered from runner/token-state).
-- Its notifications are sent once it committed (runner/wake.sql; db/009_wakes.sql says why): the
-- setting lasts to the end of this transaction, so the transition's trigger leaves them out.
WITH after_commit AS MATERIALIZED (
  SELECT set_config('oneshot.wake', 'after-commit', true) AS wake
)
UPDATE oneshot.builds
SET status = $2, finished_at = clock_timestamp(), exit_code = $3, error = $4,
    outputs = $5::text::jsonb, reason = $6, usage = $8::text::jsonb
FROM after_commit
WHERE token_hash = $1 AND status = 'running' AND runner_id = $7 AND after_commit.wake IS NOT NULL
RETURNING id, attempt, status, route,
          extract(epoch FROM finished_at - started_at)::float8 AS ran
