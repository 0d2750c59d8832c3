-- Why pending builds wait, read as it is asked, for one build or a page of a list: an earlier
-- unfinished build of its workspace, its route's live builds against its limit, the builds of its
-- route that will be claimed before it (higher priority, or as high and older, and not held back by
-- their own workspace, as the claim counts them; counted up to 1001, so that a page of a million
-- queued builds reads as fast as one), and all live builds (for the global limit); its route's team,
-- and the holds on its route and team (db/019_fair_share.sql); its route's cluster and stall
-- (db/022_clusters.sql).
-- Transition: none (read). A build that is not pending has no row.
SELECT b.id, b.route, b.workspace,
       r.max_concurrent, coalesce(r.team, r.name) AS team,
       r.held_at, r.held_by, r.held_why, r.cluster, r.stalled, r.stalled_at,
       t.held_at AS team_held_at, t.held_by AS team_held_by, t.held_why AS team_held_why,
       w.id AS workspace_build, w.status AS workspace_status,
       (SELECT count(*) FROM oneshot.builds x
        WHERE x.route = b.route AND x.status IN ('launching', 'running'))::int AS route_live,
       (SELECT count(*) FROM oneshot.builds x
        WHERE x.status IN ('launching', 'running'))::int AS global_live,
       (SELECT count(*) FROM (
          SELECT 1 FROM oneshot.builds x
          WHERE x.route = b.route AND x.status = 'pending'
            AND (x.priority > b.priority OR (x.priority = b.priority AND x.id < b.id))
            AND (x.workspace IS NULL OR NOT EXISTS (
              SELECT 1 FROM oneshot.builds y
              WHERE y.route = x.route AND y.workspace = x.workspace AND y.id < x.id
                AND y.status IN ('pending', 'launching', 'running')))
          LIMIT 1001) a)::int AS ahead
FROM oneshot.builds b
LEFT JOIN oneshot.routes r ON r.name = b.route
LEFT JOIN oneshot.teams t ON t.name = coalesce(r.team, r.name)
LEFT JOIN LATERAL (
  SELECT x.id, x.status FROM oneshot.builds x
  WHERE b.workspace IS NOT NULL AND x.route = b.route AND x.workspace = b.workspace AND x.id < b.id
    AND x.status IN ('pending', 'launching', 'running')
  ORDER BY x.id LIMIT 1
) w ON true
WHERE b.id = ANY($1) AND b.status = 'pending'
