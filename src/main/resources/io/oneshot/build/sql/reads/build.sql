-- One build, as the API and the CLI show it (reads/list selects the same columns), with its current
-- attempt's launch record (db/014_launch_records.sql) if any (a build requeued and pending again
-- has none until its next attempt is launched), and whether the rescuer removed that attempt.
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
WHERE b.id = $1
