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
  -- The launches' builds, current and not held FOR UPDATE by another transaction.
  SELECT x.id, x.attempt, x.status, x.created_at FROM oneshot.builds x JOIN i ON x.id = i.id
  WHERE x.attempt = i.attempt
    AND x.status NOT IN ('pending', 'succeeded', 'failed', 'canceled')
  ORDER BY x.id
  FOR KEY SHARE OF x SKIP LOCKED
), l AS (
  INSERT INTO oneshot.build_launches (build_id, attempt, kind, name, namespace)
  SELECT i.id, i.attempt, i.kind, i.name, i.namespace FROM i JOIN free ON free.id = i.id
  ORDER BY i.id
  ON CONFLICT (build_id, attempt) DO NOTHING
  RETURNING build_id, attempt, launched_at
), e AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT free.id, free.attempt, free.status, free.status, i.detail
  FROM l JOIN free ON free.id = l.build_id JOIN i ON i.id = l.build_id
  ORDER BY free.id
)
SELECT l.build_id AS id, extract(epoch FROM l.launched_at - free.created_at)::float8 AS dispatch,
       false AS held
FROM l JOIN free ON free.id = l.build_id
UNION ALL
-- Held by another transaction, and still to be recorded as far as this statement's snapshot shows.
SELECT i.id, NULL, true
FROM i JOIN oneshot.builds x ON x.id = i.id
WHERE i.id NOT IN (SELECT id FROM free) AND x.attempt = i.attempt
  AND x.status NOT IN ('pending', 'canceled', 'succeeded', 'failed')
  AND NOT EXISTS (SELECT 1 FROM oneshot.build_launches r
                  WHERE r.build_id = i.id AND r.attempt = i.attempt)
