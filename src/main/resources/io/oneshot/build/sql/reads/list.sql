-- Builds newest first, a page at a time ($3: before this id), filtered by status ($1), route ($2),
-- the routes a token covers ($5), tags that contain $6 (json), workspace ($7) and created at or
-- after $8, each when not null; the same columns as reads/build.
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
  AND ($6::text IS NULL OR tags @> $6::text::jsonb) AND ($7::text IS NULL OR workspace = $7)
  AND ($8::timestamptz IS NULL OR created_at >= $8)
ORDER BY id DESC LIMIT $4
