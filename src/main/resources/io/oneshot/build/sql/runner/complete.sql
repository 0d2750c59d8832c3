-- provisionerd's outcome. The final state, when sent, is stored first in the same transaction
-- (state/save). Transition: running -> succeeded|failed|canceled.
-- Guards: token_hash = $1, status = 'running', runner_id = $7 (the bound runner of the running
-- attempt only; anything else is answered from runner/token-state).
UPDATE oneshot.builds
SET status = $2, finished_at = clock_timestamp(), exit_code = $3, error = $4,
    outputs = $5::text::jsonb, reason = $6
WHERE token_hash = $1 AND status = 'running' AND runner_id = $7
RETURNING id, attempt, status, route,
          extract(epoch FROM finished_at - started_at)::float8 AS ran
