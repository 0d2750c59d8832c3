-- Cancel: at once when the build is pending or launching, by request when it runs (provisionerd learns
-- it on its next heartbeat and reports canceled).
-- Transitions: pending|launching -> canceled; running -> running with cancel_requested_at set.
-- Guard: the row lock of "cur" and status IN ('pending', 'launching', 'running'); a finished build is
-- left alone and reported as such.
-- $2: who asked (a token's name, or admin; null from SQL): the timeline says it, in the canceled
-- build's reason, or for a running build in a step of its own the first time it is asked.
WITH cur AS (
  SELECT id, status, route, attempt, cancel_requested_at FROM oneshot.builds WHERE id = $1 FOR UPDATE
), asked AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT cur.id, cur.attempt, 'running', 'running', 'cancel asked for' || coalesce(' by ' || $2::text, '')
  FROM cur WHERE cur.status = 'running' AND cur.cancel_requested_at IS NULL
), upd AS (
  UPDATE oneshot.builds b
  SET status = CASE WHEN cur.status = 'running' THEN b.status ELSE 'canceled' END,
      finished_at = CASE WHEN cur.status = 'running' THEN b.finished_at ELSE clock_timestamp() END,
      reason = CASE WHEN cur.status = 'running' THEN b.reason
                    ELSE format('canceled%s while %s', ' by ' || $2::text, cur.status) END,
      error = CASE WHEN cur.status = 'running' THEN b.error
                    ELSE format('canceled while %s', cur.status) END,
      cancel_requested_at = coalesce(b.cancel_requested_at, clock_timestamp())
  FROM cur
  WHERE b.id = cur.id AND cur.status IN ('pending', 'launching', 'running')
  RETURNING b.id
)
SELECT cur.status, cur.route, (SELECT count(*) FROM upd) AS updated FROM cur
