-- Each route's queue over the last hour, a point per minute and one for now: builds queued (created, not yet
-- claimed nor finished) and claimed (launching or running, not finished) at that minute, for the
-- console's chart. Read from the builds themselves, so every replica draws the same chart and a
-- restart loses nothing; only live builds and those finished within the hour are read. $1: the
-- routes a token covers, null for all. A requeued build counts as queued from its creation.
-- Transition: none (read).
WITH minutes AS (
  SELECT generate_series(date_trunc('minute', clock_timestamp()) - interval '59 minutes',
                         date_trunc('minute', clock_timestamp()), interval '1 minute') AS at
  UNION ALL
  SELECT clock_timestamp() -- the last point is now
), recent AS (
  SELECT b.route, b.created_at, b.claimed_at, b.finished_at FROM oneshot.builds b
  WHERE b.status IN ('pending', 'launching', 'running')
  UNION ALL
  SELECT b.route, b.created_at, b.claimed_at, b.finished_at
  FROM oneshot.routes r
  JOIN oneshot.builds b ON b.route = r.name AND b.finished_at > clock_timestamp() - interval '1 hour'
)
SELECT r.route, (extract(epoch FROM m.at) * 1000)::bigint AS at,
       count(*) FILTER (WHERE r.created_at <= m.at AND (r.claimed_at IS NULL OR r.claimed_at > m.at)
                          AND (r.finished_at IS NULL OR r.finished_at > m.at)) AS queued,
       count(*) FILTER (WHERE r.claimed_at <= m.at
                          AND (r.finished_at IS NULL OR r.finished_at > m.at)) AS running
FROM minutes m CROSS JOIN recent r
WHERE $1::text[] IS NULL OR r.route = ANY ($1::text[])
GROUP BY r.route, m.at
ORDER BY r.route, m.at
