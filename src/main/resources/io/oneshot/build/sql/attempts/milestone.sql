-- Marks a step within the current attempt (pod scheduled, container started) in the timeline.
-- Transition: none. Guards: attempt = $2, status IN ('launching', 'running').
-- The build's row is held (a key share lock, as a foreign key's check takes) until the event is
-- written, so that a build deleted meanwhile is not left with it (db/012).
INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
SELECT id, attempt, status, status, $3 FROM oneshot.builds
WHERE id = $1 AND attempt = $2 AND status IN ('launching', 'running')
FOR KEY SHARE
