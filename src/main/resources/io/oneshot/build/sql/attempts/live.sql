-- What the rescuer reads each pass: every launching or running build, with ages measured on the
-- database's clock, and its current attempt's launch record (db/014_launch_records.sql) if any.
-- Transition: none (read).
-- Each live build looks up its own record by primary key (LATERAL; its LIMIT keeps the planner from
-- turning the lookup back into a join): joined as a table, the read was planned, whenever the
-- statistics counted many builds live (taken in a burst), as a hash join over every record kept,
-- the history included, a few times a second while builds end (StalePlanTest).
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
LEFT JOIN LATERAL (
  SELECT r.build_id, r.launched_at, r.kind, r.name, r.namespace FROM oneshot.build_launches r
  WHERE r.build_id = b.id AND r.attempt = b.attempt LIMIT 1
) l ON true
WHERE b.status IN ('launching', 'running')
ORDER BY b.id
