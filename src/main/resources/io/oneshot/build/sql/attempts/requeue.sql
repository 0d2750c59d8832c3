-- Puts a build whose attempt failed for infrastructure reasons back in the queue, or fails it when
-- that was its route's last attempt; the old attempt's token stops working. Writes what happened
-- into the build's log in the same statement.
-- Transitions: launching|running -> pending, or -> failed after maxAttempts.
-- Guards: attempt = $2 and status = $3 (a launch-timeout requeue racing an acquire loses: a build that
-- has just started running is not requeued, so it never runs twice).
WITH m AS (
  SELECT coalesce((SELECT r.max_attempts FROM oneshot.routes r
                   JOIN oneshot.builds x ON x.route = r.name WHERE x.id = $1), 0) AS max_attempts
), b AS (
  UPDATE oneshot.builds b
  SET status = CASE WHEN b.attempt < m.max_attempts THEN 'pending' ELSE 'failed' END,
      finished_at = CASE WHEN b.attempt < m.max_attempts THEN NULL ELSE clock_timestamp() END,
      error = CASE WHEN b.attempt < m.max_attempts THEN NULL
                   ELSE format('%s (attempt %s of %s)', $4::text, b.attempt, m.max_attempts) END,
      reason = CASE WHEN b.attempt < m.max_attempts
                    THEN format('requeued after attempt %s of %s: %s', b.attempt, m.max_attempts, $4::text)
                    ELSE format('%s (attempt %s of %s)', $4::text, b.attempt, m.max_attempts) END,
      token_hash = NULL, started_at = NULL, heartbeat_at = NULL,
      log_seq = b.log_seq + 1
  FROM m
  WHERE b.id = $1 AND b.attempt = $2 AND b.status = $3
  RETURNING b.id, b.attempt, b.status, b.route, b.log_seq
), line AS (
  INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
  SELECT b.id, b.log_seq, clock_timestamp(), b.attempt, 'system',
         CASE WHEN b.status = 'pending' THEN 'warn' ELSE 'error' END, NULL,
         CASE WHEN b.status = 'pending' THEN format('%s; requeued for attempt %s', $4::text, b.attempt + 1)
              ELSE format('%s; no attempts left, the build failed', $4::text) END
  FROM b
)
SELECT status, route FROM b
