-- Ends a build from the dispatcher's side (launch failed for good, cancel carried out, lost runner).
-- Transitions: launching|running -> failed|canceled.
-- Guards: attempt = $2 and status = $3 (lost race: empty answer).
UPDATE oneshot.builds
SET status = $4, finished_at = clock_timestamp(), error = $5, reason = $5
WHERE id = $1 AND attempt = $2 AND status = $3
RETURNING route, extract(epoch FROM finished_at - started_at)::float8 AS ran
