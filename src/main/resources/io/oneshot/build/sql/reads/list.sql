-- Builds newest first, a page at a time ($3: before this id), filtered by status ($1), route ($2),
-- the routes a token covers ($5), tags that contain $6 (json), workspace ($7) and created at or
-- after $8, each when not null; the same columns as reads/build.
-- Transition: none (read).
SELECT b.id, b.status, b.route, b.tags::text AS tags, b.workspace, b.priority, b.attempt,
       b.input->>'provisioner' AS provisioner, (b.input->'pod')::text AS pod, b.reason, b.created_at, b.claimed_at, l.launched_at,
       b.started_at, b.heartbeat_at, b.cancel_requested_at, b.finished_at, b.exit_code, b.error,
       b.outputs::text AS outputs, b.usage::text AS usage, coalesce(l.kind, b.launch_kind) AS launch_kind,
       coalesce(l.name, b.launch_name) AS launch_name, l.namespace AS launch_namespace,
       b.launch_pod, l.removed_at AS launch_removed_at, l.removed_why AS launch_removed_why,
       b.state_read_version, b.state_written_version, b.runner_id,
       b.runner::text AS runner, b.runner_since, b.rerun_of, b.submitted_by,
       -- What it runs, for a list (Build.what): a script's command (its first 300 characters),
       -- terraform's transition, pulumi's operation and stack.
       CASE WHEN b.input->>'provisioner' = 'script' AND jsonb_typeof(b.input->'command') = 'array'
              THEN left(array_to_string(
                ARRAY(SELECT jsonb_array_elements_text(b.input->'command')), ' '), 300)
            WHEN b.input->>'provisioner' = 'terraform'
              THEN coalesce(b.input->>'transition', 'apply')
            WHEN b.input->>'provisioner' = 'pulumi'
              THEN coalesce(b.input->>'operation', 'up') || ' ' || coalesce(b.input->>'stack', '')
       END AS what
FROM oneshot.builds b
LEFT JOIN oneshot.build_launches l
  ON l.build_id = b.id AND l.attempt = b.attempt AND b.status <> 'pending'
WHERE ($1::text IS NULL OR b.status = $1) AND ($2::text IS NULL OR b.route = $2)
  AND ($3::bigint IS NULL OR b.id < $3) AND ($5::text[] IS NULL OR b.route = ANY ($5::text[]))
  AND ($6::text IS NULL OR b.tags @> $6::text::jsonb) AND ($7::text IS NULL OR b.workspace = $7)
  AND ($8::timestamptz IS NULL OR b.created_at >= $8)
ORDER BY b.id DESC LIMIT $4
