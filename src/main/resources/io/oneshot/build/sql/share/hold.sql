-- Holds a route or a team ($1 'route' | 'team', $2 its name, $3 who, $4 why; db/019_fair_share.sql):
-- the claim takes none of its builds until it is released; its queued builds stay queued and say
-- why. A hold on a held one takes its who, why and time. Answers the one held (no row: none of that
-- name). Transition: none (an operator's hold).
WITH r AS (
  UPDATE oneshot.routes SET held_at = clock_timestamp(), held_by = $3, held_why = $4
  WHERE $1 = 'route' AND name = $2
  RETURNING name, held_at, held_by, held_why
), t AS (
  -- A team that names no row of its own yet (a route's own team, before the routes were mirrored
  -- with teams) gets one, of weight 1, as the mirror writes it.
  INSERT INTO oneshot.teams AS x (name, weight, held_at, held_by, held_why)
  SELECT $2, 1, clock_timestamp(), $3, $4
  WHERE $1 = 'team'
    AND EXISTS (SELECT 1 FROM oneshot.routes WHERE coalesce(team, name) = $2)
  ON CONFLICT (name) DO UPDATE
    SET held_at = excluded.held_at, held_by = excluded.held_by, held_why = excluded.held_why
  RETURNING name, held_at, held_by, held_why
)
SELECT * FROM r UNION ALL SELECT * FROM t
