-- Warm capacity's forecast for route $1 at $2: for each of the last $3 weeks, the most of the
-- route's builds that held a slot at once (from their claim to their end) between that week's same
-- time and $4 ms later. A week before the route's first build the history holds is left out, so a
-- new route does not average in weeks it did not exist. $5 ms: the longest a build may hold a slot
-- (its launch timeout, timeout and graces), so that the index on (route, claimed_at) bounds the read.
-- Transition: none (read).
WITH weeks AS (
  SELECT k, $2::timestamptz - make_interval(days => 7 * k) AS ws,
         $2::timestamptz - make_interval(days => 7 * k) + make_interval(secs => $4::bigint / 1000.0) AS we
  FROM generate_series(1, $3::int) AS k
), first AS (
  SELECT min(claimed_at) AS at FROM oneshot.builds WHERE route = $1 AND claimed_at IS NOT NULL
), spans AS (
  SELECT w.k, greatest(b.claimed_at, w.ws) AS s, least(coalesce(b.finished_at, 'infinity'), w.we) AS e
  FROM weeks w
  JOIN oneshot.builds b
    ON b.route = $1
   AND b.claimed_at IS NOT NULL
   AND b.claimed_at < w.we
   AND b.claimed_at > w.ws - make_interval(secs => $5::bigint / 1000.0)
   AND (b.finished_at IS NULL OR b.finished_at > w.ws)
), points AS (
  SELECT k, s AS at, 1 AS d FROM spans
  UNION ALL
  SELECT k, e AS at, -1 AS d FROM spans
), running AS (
  -- At one instant an end comes before a start: a slot freed and taken again is one slot.
  SELECT k, sum(d) OVER (PARTITION BY k ORDER BY at, d ROWS UNBOUNDED PRECEDING) AS n FROM points
)
SELECT w.k AS week, coalesce(max(r.n), 0)::int AS peak
FROM weeks w
CROSS JOIN first f
LEFT JOIN running r ON r.k = w.k
WHERE f.at IS NOT NULL AND w.we > f.at
GROUP BY w.k
ORDER BY w.k
