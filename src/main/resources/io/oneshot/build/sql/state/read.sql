-- The state of one version of route $1's workspace $2 (the latest when $3 is null), with its
-- version (what the sealed state is bound to). Transition: none (read).
SELECT state, version FROM oneshot.workspace_states
WHERE route = $1 AND workspace = $2 AND ($3::int IS NULL OR version = $3)
ORDER BY version DESC LIMIT 1
