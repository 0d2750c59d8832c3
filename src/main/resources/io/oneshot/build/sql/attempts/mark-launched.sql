-- Launch bookkeeping: records the launches the launcher confirmed, many in one statement, each as
-- its attempt's row in build_launches (db/014_launch_records.sql) with a timeline event.
-- Transition: none (launching|running, the attempt's launch recorded).
-- Guards: x.attempt = i.attempt (a late record of attempt N must not mark attempt N+1 launched),
-- status launching or running, ON CONFLICT (recorded once).
-- The status guard names the statuses it excludes (the table's CHECK allows six): written as
-- status IN ('launching', 'running'), it let the planner scan every live build through the
-- builds_live index and join the batch to each, whenever the table's statistics predated a burst
-- (estimating a handful of live builds where there were thousands: 7 ms for 6 launches with 2,000
-- live). Here only the primary key can find the rows, one lookup a launch, whatever the statistics
-- say (StalePlanTest).
-- No two of the statement's own results (i, free, l) are joined to each other: the planner takes
-- each for a row or ten whatever a batch holds, and joined them in nested loops, each row of one
-- against every row of the other. A burst's records come 50 to 200 at once, and the join of l with
-- free took 49 ms of a 54 ms statement of 172 launches (auto_explain, 2026-11-28): 0.18 ms of
-- PostgreSQL a launch. free carries what the record and the event need; the events take the
-- recorded builds by an array of their ids (a scan of it in C a row); each build is looked up by
-- its primary key from its launch (LATERAL), the answer's enqueue time too (created_at never
-- changes), whatever the statistics say (StalePlanTest).
-- The build's row is held FOR KEY SHARE, so that it is not deleted while its record and timeline
-- row are written (db/012): a lock the runners' calls (NO KEY UPDATE) neither wait for nor
-- make this wait for, so that a runner acquiring within a millisecond of its launch does not queue
-- behind this statement's commit. It never waits for a row another transaction holds FOR UPDATE
-- (a cancel, a requeue): a held row comes back as held, and the recorder tries it again in its
-- next write (LaunchRecorder).
WITH i AS (
  SELECT DISTINCT ON (id) * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::text[],
                                        $6::text[])
    AS i(id, attempt, kind, name, namespace, detail)
  ORDER BY id
), free AS MATERIALIZED (
  -- The launches' builds, current and not held FOR UPDATE by another transaction, each looked up
  -- from its launch (LATERAL), in id order: statistics from before a burst take the live builds for
  -- none, and a plan made for a batch it knows the size of scanned the table and tried each launch
  -- against each build (81 ms for 200 launches among 2,000 live builds).
  SELECT x.id, x.attempt, x.status, i.kind, i.name, i.namespace, i.detail
  FROM i CROSS JOIN LATERAL (
    SELECT x.id, x.attempt, x.status FROM oneshot.builds x
    WHERE x.id = i.id AND x.attempt = i.attempt
      AND x.status NOT IN ('pending', 'succeeded', 'failed', 'canceled')
    FOR KEY SHARE OF x SKIP LOCKED
  ) x
), l AS (
  INSERT INTO oneshot.build_launches (build_id, attempt, kind, name, namespace)
  SELECT id, attempt, kind, name, namespace FROM free ORDER BY id
  ON CONFLICT (build_id, attempt) DO NOTHING
  RETURNING build_id, attempt, launched_at
), e AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT free.id, free.attempt, free.status, free.status, free.detail
  FROM free WHERE free.id = ANY (ARRAY(SELECT build_id FROM l))
  ORDER BY free.id
)
SELECT l.build_id AS id, extract(epoch FROM l.launched_at - b.created_at)::float8 AS dispatch,
       false AS held
FROM l CROSS JOIN LATERAL (
  -- LIMIT: one row by its key, and a subquery the planner keeps as it is, not pulled up into a join
  SELECT b.created_at FROM oneshot.builds b WHERE b.id = l.build_id LIMIT 1
) b
UNION ALL
-- Held by another transaction, and still to be recorded as far as this statement's snapshot shows.
SELECT i.id, NULL, true
FROM i CROSS JOIN LATERAL (
  -- A zero offset: a subquery the planner keeps as it is, not pulled up into a join
  SELECT x.id FROM oneshot.builds x
  WHERE x.id = i.id
    AND x.status NOT IN ('pending', 'canceled', 'succeeded', 'failed')
    AND x.attempt = i.attempt
  OFFSET 0
) x
WHERE i.id NOT IN (SELECT id FROM free)
  AND NOT EXISTS (SELECT 1 FROM oneshot.build_launches r
                  WHERE r.build_id = i.id AND r.attempt = i.attempt)
