-- The current status and attempt of some builds, for finding attempts nobody needs (launcher
-- garbage collection). Transition: none (read).
SELECT id, status, attempt, started_at IS NOT NULL AS started,
       (extract(epoch FROM clock_timestamp() - finished_at) * 1000)::bigint AS finished_ago
FROM oneshot.builds WHERE id = ANY ($1::bigint[])
