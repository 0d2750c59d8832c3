-- Appends a line from oneshot itself (the dispatcher, the launcher, the runner API) to a build's log,
-- numbered under the build's row lock like every other line. Transition: none; any status, since a
-- note may follow the build's end (a refused final state).
-- Guard: attempt = $2 (a line about an attempt that is no longer the build's latest is not written).
-- With $5 (a launcher's note on what the attempt waits for: a pod no node can take, an image that
-- cannot be pulled), the build's reason becomes $5 too while it is launching (status = 'launching').
WITH b AS (
  UPDATE oneshot.builds SET log_seq = log_seq + 1,
    reason = CASE WHEN $5::text IS NOT NULL AND status = 'launching' THEN $5::text ELSE reason END
  WHERE id = $1 AND attempt = $2
  RETURNING id, log_seq, route
), line AS (
  INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
  SELECT b.id, b.log_seq, clock_timestamp(), $2, 'system', $3, NULL, $4 FROM b
)
SELECT route FROM b
