-- Marks an attempt's launch record removed: the launcher deleted what ran it (its Job and pod,
-- its process), so `kubectl logs` can no longer read it. Transition: none.
-- Guards: removed_at IS NULL (the first removal is the one kept; a retried kill changes nothing).
UPDATE oneshot.build_launches SET removed_at = clock_timestamp(), removed_why = $3
WHERE build_id = $1 AND attempt = $2 AND removed_at IS NULL
