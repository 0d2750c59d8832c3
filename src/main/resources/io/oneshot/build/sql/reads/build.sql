-- One build, as the API and the CLI show it (reads/list selects the same columns).
-- Transition: none (read).
SELECT id, status, route, tags::text AS tags, workspace, priority, attempt,
       input->>'provisioner' AS provisioner, reason, created_at, claimed_at, launched_at,
       started_at, heartbeat_at, cancel_requested_at, finished_at, exit_code, error,
       outputs::text AS outputs, launch_kind, launch_name, launch_namespace, launch_pod,
       state_read_version, state_written_version, runner_id, runner::text AS runner, runner_since,
       rerun_of, submitted_by
FROM oneshot.builds
WHERE id = $1
