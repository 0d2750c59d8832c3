-- Releases a route or a team ($1 'route' | 'team', $2 its name): the claim takes its builds again,
-- and the dispatcher hears it at once (oneshot_builds) rather than at its next poll. Answers the
-- hold it had (held_at null: it was not held; no row: none of that name). Transition: none (an
-- operator's release).
WITH before AS (
  SELECT name, held_at, held_by, held_why FROM oneshot.routes WHERE $1 = 'route' AND name = $2
  UNION ALL
  SELECT $2, t.held_at, t.held_by, t.held_why FROM (SELECT 1) one
  LEFT JOIN oneshot.teams t ON t.name = $2
  WHERE $1 = 'team' AND EXISTS (SELECT 1 FROM oneshot.routes WHERE coalesce(team, name) = $2)
), r AS (
  UPDATE oneshot.routes SET held_at = NULL, held_by = NULL, held_why = NULL
  WHERE $1 = 'route' AND name = $2
  RETURNING 1
), t AS (
  UPDATE oneshot.teams SET held_at = NULL, held_by = NULL, held_why = NULL
  WHERE $1 = 'team' AND name = $2
  RETURNING 1
)
SELECT b.name, b.held_at, b.held_by, b.held_why,
       (SELECT count(pg_notify('oneshot_builds', '')) FROM (SELECT 1) one
        WHERE b.held_at IS NOT NULL) AS woken
FROM before b
