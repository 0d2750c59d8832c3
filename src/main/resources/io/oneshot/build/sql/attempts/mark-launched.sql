-- Launch bookkeeping: records the launches the launcher confirmed, many in one statement, with a
-- timeline event each. Transition: none (launching|running, launched_at set).
-- Guards: b.attempt = i.attempt (a late record of attempt N must not mark attempt N+1 launched),
-- status launching or running, launched_at IS NULL (recorded once).
-- The status guard names the statuses it excludes (the table's CHECK allows six): written as
-- status IN ('launching', 'running'), it let the planner scan every live build through the
-- builds_live index and join the batch to each, whenever the table's statistics predated a burst
-- (estimating a handful of live builds where there were thousands: 7 ms for 6 launches with 2,000
-- live). Here only the primary key can find the rows, one lookup a launch, whatever the statistics
-- say (StalePlanTest).
-- It never waits for a row another transaction holds (a runner's acquire or completion under way):
-- waiting made that runner's next call wait for this statement's commit in turn, and with runners
-- that answer at once the two queued behind each other. A held row comes back as held, and the
-- recorder tries it again in its next write (LaunchRecorder).
WITH i AS (
  SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[])
    AS i(id, attempt, kind, name, namespace, detail)
  ORDER BY id
), free AS MATERIALIZED (
  -- The launches' rows that no other transaction holds, locked for the update below.
  SELECT x.id FROM oneshot.builds x JOIN i ON x.id = i.id
  ORDER BY x.id
  FOR UPDATE OF x SKIP LOCKED
), b AS (
  UPDATE oneshot.builds b
  SET launched_at = clock_timestamp(), launch_kind = i.kind, launch_name = i.name,
      launch_namespace = i.namespace
  FROM i, free
  WHERE b.id = free.id AND b.id = i.id AND b.attempt = i.attempt
    AND b.status NOT IN ('pending', 'succeeded', 'failed', 'canceled')
    AND b.launched_at IS NULL
  RETURNING b.id, b.attempt, b.status, i.detail,
            extract(epoch FROM b.launched_at - b.created_at)::float8 AS dispatch
), e AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT id, attempt, status, status, detail FROM b ORDER BY id
)
SELECT id, dispatch, false AS held FROM b
UNION ALL
-- Held by another transaction, and still to be recorded as far as this statement's snapshot shows.
SELECT i.id, NULL, true
FROM i JOIN oneshot.builds x ON x.id = i.id
WHERE i.id NOT IN (SELECT id FROM free) AND x.launched_at IS NULL AND x.attempt = i.attempt
  AND x.status NOT IN ('pending', 'succeeded', 'failed', 'canceled')
