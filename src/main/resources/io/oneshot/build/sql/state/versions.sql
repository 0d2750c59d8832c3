-- A workspace's state versions, newest first, without the states. Transition: none (read).
SELECT version, build_id, attempt, bytes, serial, lineage, final, created_at, updated_at
FROM oneshot.workspace_states WHERE workspace = $1 ORDER BY version DESC
