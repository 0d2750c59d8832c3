-- The workspaces with state, newest change first: the latest version, how many, when it changed.
-- $1: a token's routes (a workspace is listed when every build that used it is of them), null for
-- all. Transition: none (read).
SELECT s.workspace, max(s.version) AS latest, count(*) AS versions, max(s.updated_at) AS updated_at
FROM oneshot.workspace_states s
WHERE $1::text[] IS NULL OR NOT EXISTS (
  SELECT 1 FROM oneshot.builds b
  WHERE b.workspace = s.workspace AND NOT (b.route = ANY ($1::text[])))
GROUP BY s.workspace
ORDER BY max(s.updated_at) DESC
LIMIT 500
