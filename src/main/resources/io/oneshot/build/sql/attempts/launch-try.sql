-- Before a launch is tried again: the attempt is still the build's and not launched, and the
-- dispatcher that claimed it still leads (its leadership session, $4 pid and $5 backend start, holds
-- the leader lock $6, $7), so that a deposed leader never launches over its successor.
-- Transition: none (launching); the reason says the launch is being tried.
-- Guards: attempt = $2, status = 'launching', no launch recorded for the attempt, the leader fence. $4 null: no
-- fence (tests that drive launches directly).
UPDATE oneshot.builds SET reason = $3
WHERE id = $1 AND attempt = $2 AND status = 'launching'
  AND NOT EXISTS (SELECT 1 FROM oneshot.build_launches l WHERE l.build_id = $1 AND l.attempt = $2)
  AND ($4::int IS NULL OR EXISTS (
    SELECT 1 FROM pg_lock_status() l, pg_stat_get_activity($4) a
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.classid::bigint = $6 AND l.objid::bigint = $7
      AND l.pid = $4 AND a.backend_start = $5))
RETURNING id
