-- The workspaces with state, newest change first: each route's workspace with its latest version,
-- how many, when it changed. $1: a token's routes, null for all. Transition: none (read).
SELECT s.route, s.workspace, max(s.version) AS latest, count(*) AS versions,
       max(s.updated_at) AS updated_at
FROM oneshot.workspace_states s
WHERE $1::text[] IS NULL OR s.route = ANY ($1::text[])
GROUP BY s.route, s.workspace
ORDER BY max(s.updated_at) DESC
LIMIT 500
