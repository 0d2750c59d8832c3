-- Marks a step within the current attempt (pod scheduled, container started) in the timeline.
-- Transition: none. Guards: attempt = $2, status IN ('launching', 'running').
INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
SELECT id, attempt, status, status, $3 FROM oneshot.builds
WHERE id = $1 AND attempt = $2 AND status IN ('launching', 'running')
