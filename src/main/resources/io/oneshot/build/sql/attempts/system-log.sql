-- Appends a line from oneshot itself (the dispatcher, the launcher) to a build's log, numbered under
-- the build's row lock like every other line. Transition: none.
WITH b AS (
  UPDATE oneshot.builds SET log_seq = log_seq + 1 WHERE id = $1 RETURNING id, log_seq, route
), line AS (
  INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
  SELECT b.id, b.log_seq, clock_timestamp(), $2, 'system', $3, NULL, $4 FROM b
)
SELECT route FROM b
