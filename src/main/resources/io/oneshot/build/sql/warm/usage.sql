-- Warm capacity's cost: balloon seconds ($2) and preemptions ($3) added to each route's ($1) current
-- hour; hours older than eight days go. Transition: none (the leader's bookkeeping).
WITH pruned AS (
  DELETE FROM oneshot.balloon_usage WHERE hour < date_trunc('hour', clock_timestamp()) - interval '8 days'
)
INSERT INTO oneshot.balloon_usage AS u (route, hour, balloon_seconds, preemptions)
SELECT route, date_trunc('hour', clock_timestamp()), seconds, preemptions
FROM unnest($1::text[], $2::float8[], $3::int[]) AS t(route, seconds, preemptions)
ON CONFLICT (route, hour) DO UPDATE SET
  balloon_seconds = u.balloon_seconds + EXCLUDED.balloon_seconds,
  preemptions = u.preemptions + EXCLUDED.preemptions
