-- Builds newest first, a page at a time ($3: before this id), filtered by status ($1), route ($2)
-- and the routes a token covers ($5) when they are not null; the same columns as reads/build.
-- Transition: none (read).
SELECT id, status, route, tags::text AS tags, workspace, priority, attempt,
       input->>'provisioner' AS provisioner, reason, created_at, claimed_at, launched_at,
       started_at, heartbeat_at, cancel_requested_at, finished_at, exit_code, error,
       outputs::text AS outputs, launch_kind, launch_name, launch_namespace, launch_pod,
       state_read_version, state_written_version, runner_id, runner::text AS runner, runner_since,
       rerun_of, submitted_by
FROM oneshot.builds
WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR route = $2)
  AND ($3::bigint IS NULL OR id < $3) AND ($5::text[] IS NULL OR route = ANY ($5::text[]))
ORDER BY id DESC LIMIT $4
