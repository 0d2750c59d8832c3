-- What the rescuer reads each pass: every launching or running build, with ages measured on the
-- database's clock. An attempt launched again after a restart gets its whole launch timeout.
-- Transition: none (read).
SELECT id, status, attempt, route, input->>'provisioner' AS provisioner,
       launch_kind, launch_name, launch_namespace, launched_at IS NOT NULL AS launched,
       cancel_requested_at IS NOT NULL AS cancel_requested,
       -- An attempt launched again after a restart gets its whole launch timeout.
       (extract(epoch FROM clock_timestamp() - coalesce(launched_at, claimed_at)) * 1000)::bigint
         AS claimed_ago,
       (extract(epoch FROM clock_timestamp() - started_at) * 1000)::bigint AS started_ago,
       (extract(epoch FROM clock_timestamp() - heartbeat_at) * 1000)::bigint AS heartbeat_ago,
       (extract(epoch FROM clock_timestamp() - cancel_requested_at) * 1000)::bigint AS cancel_ago
FROM oneshot.builds
WHERE status IN ('launching', 'running')
ORDER BY id
