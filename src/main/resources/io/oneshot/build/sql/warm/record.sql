-- Warm capacity: what the leader counted and saw of every warm route's balloons (arrays, one entry
-- per route: $1 names, $2 wanted, $3 why, $4 running, $5 pending, $6 trouble); rows of routes no
-- longer warm go. Transition: none (the leader's own bookkeeping; a follower never writes it).
WITH now_warm AS (
  SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::int[], $6::text[])
    AS t(route, wanted, why, running, pending, trouble)
), gone AS (
  DELETE FROM oneshot.route_warmth w
  WHERE NOT EXISTS (SELECT 1 FROM now_warm n WHERE n.route = w.route)
)
INSERT INTO oneshot.route_warmth (route, wanted, why, running, pending, trouble, updated_at)
SELECT route, wanted, why, running, pending, trouble, clock_timestamp() FROM now_warm
ON CONFLICT (route) DO UPDATE SET
  wanted = EXCLUDED.wanted, why = EXCLUDED.why, running = EXCLUDED.running,
  pending = EXCLUDED.pending, trouble = EXCLUDED.trouble, updated_at = EXCLUDED.updated_at
