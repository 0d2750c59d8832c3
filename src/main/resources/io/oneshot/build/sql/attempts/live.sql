-- What the rescuer reads each pass: every launching or running build, with ages measured on the
-- database's clock, and its current attempt's launch record (db/014_launch_records.sql) if any.
-- Transition: none (read).
SELECT b.id, b.status, b.attempt, b.route, b.input->>'provisioner' AS provisioner,
       coalesce(l.kind, b.launch_kind) AS launch_kind,
       coalesce(l.name, b.launch_name) AS launch_name, l.namespace AS launch_namespace,
       l.build_id IS NOT NULL AS launched,
       b.cancel_requested_at IS NOT NULL AS cancel_requested,
       -- An attempt launched again after a restart gets its whole launch timeout.
       (extract(epoch FROM clock_timestamp() - coalesce(l.launched_at, b.claimed_at)) * 1000)::bigint
         AS claimed_ago,
       (extract(epoch FROM clock_timestamp() - b.started_at) * 1000)::bigint AS started_ago,
       (extract(epoch FROM clock_timestamp() - b.heartbeat_at) * 1000)::bigint AS heartbeat_ago,
       (extract(epoch FROM clock_timestamp() - b.cancel_requested_at) * 1000)::bigint AS cancel_ago
FROM oneshot.builds b
LEFT JOIN oneshot.build_launches l ON l.build_id = b.id AND l.attempt = b.attempt
WHERE b.status IN ('launching', 'running')
ORDER BY b.id
