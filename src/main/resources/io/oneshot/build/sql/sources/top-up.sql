-- A source's top-up for one tag set: enqueues as many builds as there are jobs waiting ($4) beyond
-- the builds of this source and tag set still in flight (pending, launching, or running without a
-- job yet), never more than the route's free slots (its limit less its live and queued builds),
-- never fewer than none. Runs in the claim transaction, after queue/claim-lock: top-ups and claims
-- are serialized and fenced to the leader, so two replicas or a restart never count the same
-- waiting jobs twice.
-- A build that ended without taking a job (failed, canceled, or idle while its job still waits) still
-- counts for $8 ms after it ended: a broken route (a wrong key, an image that cannot start) gets one
-- build per waiting job per $8, never a storm.
-- $1 source, $2 tag set key (json), $3 route, $4 jobs waiting, $5 build tags (json), $6 build input
-- (json), $7 reason, $8 the failure hold in ms. Transition: (new) -> pending, for each build added.
WITH flight AS (
  SELECT count(*) FILTER (WHERE status IN ('pending', 'launching', 'running')) AS n,
         count(*) FILTER (WHERE status IN ('succeeded', 'failed', 'canceled')) AS held
  FROM oneshot.builds
  WHERE source = $1 AND source_key = $2::text::jsonb AND source_taken_at IS NULL
    AND (status IN ('pending', 'launching', 'running')
         OR (status IN ('succeeded', 'failed', 'canceled')
             AND finished_at > clock_timestamp() - make_interval(secs => $8::bigint / 1000.0)))
), route AS (
  SELECT r.max_concurrent - (SELECT count(*) FROM oneshot.builds b
                             WHERE b.route = r.name AND b.status IN ('pending', 'launching', 'running')) AS free
  FROM oneshot.routes r WHERE r.name = $3
), want AS (
  SELECT flight.n AS in_flight, flight.held,
         GREATEST(0, LEAST($4::bigint - flight.n - flight.held, coalesce(route.free, 0))) AS add
  FROM flight LEFT JOIN route ON true
), added AS (
  INSERT INTO oneshot.builds (route, tags, input, priority, reason, source, source_key)
  SELECT $3, $5::text::jsonb, $6::text::jsonb, 0, $7, $1, $2::text::jsonb
  FROM want, generate_series(1, want.add)
  RETURNING id
)
SELECT want.in_flight, want.held, (SELECT count(*) FROM added) AS added FROM want
