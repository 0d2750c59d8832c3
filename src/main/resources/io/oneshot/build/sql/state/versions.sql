-- The state versions of route $1's workspace $2, newest first, without the states; format: terraform's
-- state or a Pulumi checkpoint.
-- Transition: none (read).
SELECT version, build_id, attempt, bytes, serial, lineage, final, created_at, updated_at, format
FROM oneshot.workspace_states WHERE route = $1 AND workspace = $2 ORDER BY version DESC
