-- The routes with their queues, for GET /api/v1/routes and oneshot routes: queued, running, the
-- oldest wait and its build, wait percentiles over the last hour's claims, run-time percentiles and
-- failures over the last hour's ends; for a warm route, its balloons as
-- the leader last counted and saw them (db/017_warm_capacity.sql) and their cost over the last day;
-- its team and an operator's hold on it (db/019_fair_share.sql); its cluster, and why it takes no
-- launches now when its cluster is in trouble (db/022_clusters.sql).
-- Transition: none (read).
SELECT r.name, r.tags::text AS tags, r.template, r.max_concurrent,
       coalesce(r.team, r.name) AS team, r.held_at, r.held_by, r.held_why,
       r.cluster, r.stalled, r.stalled_at,
       (SELECT count(*) FROM oneshot.builds b
        WHERE b.route = r.name AND b.status = 'pending') AS queued,
       (SELECT count(*) FROM oneshot.builds b
        WHERE b.route = r.name AND b.status IN ('launching', 'running')) AS running,
       o.oldest, o.oldest_id,
       w.p50, w.p95, f.run_p50, f.run_p95, f.finished, f.failed,
       h.wanted AS warm_wanted, h.why AS warm_why, h.running AS warm_running,
       h.pending AS warm_pending, h.trouble AS warm_trouble,
       (extract(epoch FROM h.updated_at) * 1000)::bigint AS warm_at,
       (SELECT coalesce(sum(u.balloon_seconds), 0) / 3600.0 FROM oneshot.balloon_usage u
        WHERE u.route = r.name AND u.hour > clock_timestamp() - interval '1 day') AS warm_hours,
       (SELECT coalesce(sum(u.preemptions), 0) FROM oneshot.balloon_usage u
        WHERE u.route = r.name AND u.hour > clock_timestamp() - interval '1 day')::int AS warm_preemptions
FROM oneshot.routes r
LEFT JOIN oneshot.route_warmth h ON h.route = r.name
LEFT JOIN LATERAL (
  SELECT (extract(epoch FROM clock_timestamp() - b.created_at) * 1000)::bigint AS oldest,
         b.id AS oldest_id
  FROM oneshot.builds b WHERE b.route = r.name AND b.status = 'pending'
  ORDER BY b.id LIMIT 1
) o ON true
LEFT JOIN LATERAL (
  -- The builds that ended in the last hour (the last 1,000 at most): how long they ran (from
  -- provisionerd's acquire), and how many failed of those that ran to an outcome.
  SELECT (percentile_cont(0.5) WITHIN GROUP (ORDER BY f.ran) * 1000)::bigint AS run_p50,
         (percentile_cont(0.95) WITHIN GROUP (ORDER BY f.ran) * 1000)::bigint AS run_p95,
         count(*) FILTER (WHERE f.status IN ('succeeded', 'failed')) AS finished,
         count(*) FILTER (WHERE f.status = 'failed') AS failed
  FROM (
    SELECT f.status, extract(epoch FROM f.finished_at - f.started_at) AS ran
    FROM oneshot.builds f
    WHERE f.route = r.name AND f.finished_at > clock_timestamp() - interval '1 hour'
    ORDER BY f.finished_at DESC
    LIMIT 1000
  ) f
) f ON true
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
