-- A source's builds per tag set that still count for its waiting jobs: those in flight (pending,
-- launching, or running without a job yet) and those that ended without taking a job within the
-- failure hold ($2 ms: a broken route gets one build per waiting job per hold, never a storm).
-- Read under the sources lock before the source's own query: a build that takes its job meanwhile
-- is counted here and its job is gone there, so the count errs low, never high.
-- $1 source, $2 the failure hold in ms. Transition: none (read).
SELECT source_key::text AS key,
       count(*) FILTER (WHERE status IN ('pending', 'launching', 'running')) AS in_flight,
       count(*) FILTER (WHERE status IN ('succeeded', 'failed', 'canceled')) AS held
FROM oneshot.builds
WHERE source = $1 AND source_taken_at IS NULL
  AND (status IN ('pending', 'launching', 'running')
       OR (status IN ('succeeded', 'failed', 'canceled')
           AND finished_at > clock_timestamp() - make_interval(secs => $2::bigint / 1000.0)))
GROUP BY source_key
