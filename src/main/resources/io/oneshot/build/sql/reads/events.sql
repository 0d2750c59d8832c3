-- A build's timeline, in the order it was written. A claim (pending → launching) comes with how long
-- the build was queued before it (since its enqueue or its last requeue) and, when an earlier build
-- of its workspace ended meanwhile, the last such: the build it waited behind, so that the timeline
-- keeps why it waited after the queue's reason is gone.
-- Transition: none (read).
SELECT e.at, e.attempt, e.from_status, e.to_status, e.reason,
       (extract(epoch FROM e.at - q.at) * 1000)::bigint AS queued_ms,
       w.id AS behind_build, b.workspace AS behind_workspace
FROM oneshot.build_events e
JOIN oneshot.builds b ON b.id = e.build_id
LEFT JOIN LATERAL (
  SELECT p.at FROM oneshot.build_events p
  WHERE p.build_id = e.build_id AND p.id < e.id AND p.to_status = 'pending'
  ORDER BY p.id DESC LIMIT 1
) q ON e.from_status = 'pending' AND e.to_status = 'launching'
LEFT JOIN LATERAL (
  SELECT y.id FROM oneshot.builds y
  WHERE y.route = b.route AND y.workspace = b.workspace AND y.id < b.id
    AND y.finished_at > q.at AND y.finished_at <= e.at
  ORDER BY y.finished_at DESC LIMIT 1
) w ON q.at IS NOT NULL AND b.workspace IS NOT NULL
WHERE e.build_id = $1 ORDER BY e.id
