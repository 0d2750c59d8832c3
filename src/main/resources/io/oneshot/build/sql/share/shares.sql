-- What a queued build's wait reason weighs it against (db/019_fair_share.sql): every team with its
-- weight, guarantee, borrowLimit and cap, its builds launching or running, and whether a build
-- waits on a route of it that is neither held nor at its limit (not how many, so that the read
-- stays cheap over a deep queue). Transition: none (read).
SELECT coalesce(r.team, r.name) AS name,
       coalesce(min(t.weight), 1) AS weight, coalesce(min(t.guaranteed), 0) AS guaranteed,
       min(t.borrow_limit) AS borrow_limit, min(t.max_concurrent) AS max_concurrent,
       bool_and(r.held_at IS NOT NULL) OR min(t.held_at) IS NOT NULL AS held,
       coalesce(sum(l.n), 0)::int AS live,
       bool_or(r.held_at IS NULL AND coalesce(l.n, 0) < r.max_concurrent AND EXISTS (
         SELECT 1 FROM oneshot.builds b WHERE b.route = r.name AND b.status = 'pending'))
         AS waiting
FROM oneshot.routes r
LEFT JOIN oneshot.teams t ON t.name = coalesce(r.team, r.name)
LEFT JOIN LATERAL (
  SELECT count(*) AS n FROM oneshot.builds b
  WHERE b.route = r.name AND b.status IN ('launching', 'running')
) l ON true
GROUP BY coalesce(r.team, r.name)
ORDER BY min(r.position)
