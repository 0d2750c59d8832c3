-- Ends a build from the dispatcher's side (launch failed for good, cancel carried out, lost runner),
-- and writes why into its log in the same statement, so the line is never lost to a crash between.
-- Transitions: launching|running -> failed|canceled.
-- Guards: attempt = $2 and status = $3 (lost race: empty answer, nothing written).
WITH b AS (
  UPDATE oneshot.builds
  SET status = $4, finished_at = clock_timestamp(), error = $5, reason = $5, log_seq = log_seq + 1
  WHERE id = $1 AND attempt = $2 AND status = $3
  RETURNING id, attempt, status, log_seq, route, extract(epoch FROM finished_at - started_at)::float8 AS ran
), line AS (
  INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
  SELECT b.id, b.log_seq, clock_timestamp(), b.attempt, 'system',
         CASE WHEN b.status = 'canceled' THEN 'warn' ELSE 'error' END, NULL, $5::text
  FROM b
)
SELECT route, ran FROM b
