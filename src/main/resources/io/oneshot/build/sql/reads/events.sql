-- A build's timeline, in the order it was written. Transition: none (read).
SELECT at, attempt, from_status, to_status, reason FROM oneshot.build_events
WHERE build_id = $1 ORDER BY id
