-- A claimed build's launch failed for now and is tried again later: its reason says why and when.
-- Transition: none (launching).
-- Guards: attempt = $2, status = 'launching', no launch recorded for the attempt (an attempt that moved on, or was
-- launched after all, keeps its reason). Empty answer: stop retrying.
UPDATE oneshot.builds SET reason = $3
WHERE id = $1 AND attempt = $2 AND status = 'launching'
  AND NOT EXISTS (SELECT 1 FROM oneshot.build_launches l WHERE l.build_id = $1 AND l.attempt = $2)
RETURNING id
