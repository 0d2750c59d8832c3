-- A source's top-up for one tag set: enqueues as many builds as there are jobs waiting ($4) beyond
-- those that still count for them ($8, read by sources/in-flight before the source's query), never
-- more than the route's free slots (its limit less its live and queued builds), never fewer than
-- none. Runs under the sources lock, fenced to the leader (queue/claim-lock): two replicas or a
-- restart never count the same waiting jobs twice.
-- $1 source, $2 tag set key (json), $3 route, $4 jobs waiting, $5 build tags (json), $6 build input
-- (json), $7 reason, $8 builds counted. Transition: (new) -> pending, for each build added.
WITH route AS (
  SELECT r.max_concurrent - (SELECT count(*) FROM oneshot.builds b
                             WHERE b.route = r.name AND b.status IN ('pending', 'launching', 'running')) AS free
  FROM oneshot.routes r WHERE r.name = $3
), want AS (
  SELECT GREATEST(0, LEAST($4::bigint - $8::bigint, coalesce((SELECT free FROM route), 0))) AS add
), added AS (
  INSERT INTO oneshot.builds (route, tags, input, priority, reason, source, source_key)
  SELECT $3, $5::text::jsonb, $6::text::jsonb, 0, $7, $1, $2::text::jsonb
  FROM want, generate_series(1, want.add)
  RETURNING id
)
SELECT count(*) AS added FROM added
