-- The routes with their queues, for GET /api/v1/routes and oneshot routes: queued, running, the
-- oldest wait, and wait percentiles over the last hour's claims. Transition: none (read).
SELECT r.name, r.tags::text AS tags, r.template, r.max_concurrent,
       (SELECT count(*) FROM oneshot.builds b
        WHERE b.route = r.name AND b.status = 'pending') AS queued,
       (SELECT count(*) FROM oneshot.builds b
        WHERE b.route = r.name AND b.status IN ('launching', 'running')) AS running,
       (SELECT (extract(epoch FROM clock_timestamp() - b.created_at) * 1000)::bigint
        FROM oneshot.builds b WHERE b.route = r.name AND b.status = 'pending'
        ORDER BY b.id LIMIT 1) AS oldest,
       w.p50, w.p95
FROM oneshot.routes r
LEFT JOIN LATERAL (
  -- The last 1,000 claims of the hour at most: the cost stays flat however busy the route.
  SELECT (percentile_cont(0.5) WITHIN GROUP (ORDER BY c.waited) * 1000)::bigint AS p50,
         (percentile_cont(0.95) WITHIN GROUP (ORDER BY c.waited) * 1000)::bigint AS p95
  FROM (
    SELECT extract(epoch FROM c.claimed_at - c.created_at) AS waited
    FROM oneshot.builds c
    WHERE c.route = r.name AND c.claimed_at > clock_timestamp() - interval '1 hour'
    ORDER BY c.claimed_at DESC
    LIMIT 1000
  ) c
) w ON true
ORDER BY r.position
