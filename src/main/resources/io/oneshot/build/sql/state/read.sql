-- The state of one version of a workspace (the latest when $2 is null), with its version (what the
-- sealed state is bound to). Transition: none (read).
SELECT state, version FROM oneshot.workspace_states
WHERE workspace = $1 AND ($2::int IS NULL OR version = $2)
ORDER BY version DESC LIMIT 1
