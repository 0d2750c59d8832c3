-- provisionerd's heartbeat: proves the runner alive and tells it whether cancel was requested.
-- Transition: none. Guards: token_hash = $1, status = 'running', runner_id = $2 (the bound runner only).
UPDATE oneshot.builds SET heartbeat_at = clock_timestamp()
WHERE token_hash = $1 AND status = 'running' AND runner_id = $2
RETURNING cancel_requested_at IS NOT NULL AS cancel_requested
