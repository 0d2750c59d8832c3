-- The teams with their use, for GET /api/v1/teams, oneshot routes, the console and the metrics
-- (db/019_fair_share.sql): every team a route is in (a route that names none is a team of its own,
-- of weight 1, whether or not the mirror wrote it a row), its rules, its hold, its routes in their
-- order, and its builds running (launching or running) and queued. Transition: none (read).
WITH rt AS (
  SELECT r.name AS route, coalesce(r.team, r.name) AS team, r.position FROM oneshot.routes r
), counts AS (
  SELECT rt.route,
         (SELECT count(*) FROM oneshot.builds b
          WHERE b.route = rt.route AND b.status IN ('launching', 'running')) AS running,
         (SELECT count(*) FROM oneshot.builds b
          WHERE b.route = rt.route AND b.status = 'pending') AS queued
  FROM rt
)
SELECT rt.team AS name, array_agg(rt.route ORDER BY rt.position) AS routes,
       sum(c.running)::bigint AS running, sum(c.queued)::bigint AS queued,
       coalesce(min(t.weight), 1) AS weight, coalesce(min(t.guaranteed), 0) AS guaranteed,
       min(t.borrow_limit) AS borrow_limit, min(t.max_concurrent) AS max_concurrent,
       min(t.held_at) AS held_at, min(t.held_by) AS held_by, min(t.held_why) AS held_why
FROM rt JOIN counts c ON c.route = rt.route
LEFT JOIN oneshot.teams t ON t.name = rt.team
GROUP BY rt.team
ORDER BY min(rt.position)
