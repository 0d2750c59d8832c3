-- The state of one version of a workspace (the latest when $2 is null). Transition: none (read).
SELECT state FROM oneshot.workspace_states
WHERE workspace = $1 AND ($2::int IS NULL OR version = $2)
ORDER BY version DESC LIMIT 1
