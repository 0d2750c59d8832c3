-- Writes a refused second runner into the build's log and timeline. Transition: none.
-- Guards: attempt = $2, status IN ('launching', 'running') (nothing for an attempt no longer current).
WITH b AS (
  UPDATE oneshot.builds SET log_seq = log_seq + 1
  WHERE id = $1 AND attempt = $2 AND status IN ('launching', 'running')
  RETURNING id, log_seq, status
), line AS (
  INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
  SELECT b.id, b.log_seq, clock_timestamp(), $2, 'system', 'warn', NULL, $3 FROM b
)
INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
SELECT b.id, $2, b.status, b.status, $3 FROM b
