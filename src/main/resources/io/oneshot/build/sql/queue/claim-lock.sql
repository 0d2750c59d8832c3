-- Claim, step 1: serializes claims (limits are counted with every earlier claim committed) and checks
-- the leader fence: that the claiming replica's leadership session ($3 pid, $4 backend start) still
-- holds the leader lock ($5, $6). $3 null: no fence (tests that drive claims directly).
-- Transition: none; a fence that does not hold raises OS412 (oneshot.fenced_out), which aborts the
-- transaction: the claim sent after it in the same round trip fails and its COMMIT rolls back.
-- The fence reads the lock table and the one backend's status (pg_stat_get_activity($3)), not the
-- pg_locks and pg_stat_activity views: the views join every backend with roles and databases, and
-- took a claim about 0.7 ms to plan and run against 0.1 ms for the same check (EXPLAIN ANALYZE).
SELECT pg_advisory_xact_lock($1, $2),
       CASE WHEN $3::int IS NULL OR EXISTS (
         SELECT 1 FROM pg_lock_status() l, pg_stat_get_activity($3) a
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
           AND l.classid::bigint = $5 AND l.objid::bigint = $6
           AND l.pid = $3 AND a.backend_start = $4)
       THEN true ELSE oneshot.fenced_out($3, $4) END AS fenced
