-- Routes the configuration no longer has ($1: the names it has) whose workspaces hold state: a
-- route renamed leaves its workspaces under the old name (db/016_workspaces_by_route.sql), which
-- the dispatcher says at start. Transition: none (read).
SELECT route, count(DISTINCT workspace) AS workspaces
FROM oneshot.workspace_states
WHERE NOT (route = ANY ($1::text[]))
GROUP BY route ORDER BY route
