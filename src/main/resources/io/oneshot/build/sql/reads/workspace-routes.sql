-- The routes with state of workspace $1, among routes $2 (null: all), for the API to find the
-- workspace a caller means when it names no route. Transition: none (read).
SELECT DISTINCT route FROM oneshot.workspace_states
WHERE workspace = $1 AND ($2::text[] IS NULL OR route = ANY ($2::text[]))
ORDER BY route
