-- Appends a line from oneshot itself (the dispatcher, the launcher, the runner API) to a build's log,
-- numbered under the build's row lock like every other line. Transition: none; any status, since a
-- note may follow the build's end (a refused final state).
-- Guard: attempt = $2 (a line about an attempt that is no longer the build's latest is not written).
WITH b AS (
  UPDATE oneshot.builds SET log_seq = log_seq + 1 WHERE id = $1 AND attempt = $2
  RETURNING id, log_seq, route
), line AS (
  INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
  SELECT b.id, b.log_seq, clock_timestamp(), $2, 'system', $3, NULL, $4 FROM b
)
SELECT route FROM b
