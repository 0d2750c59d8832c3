-- Launch bookkeeping: records the launches the launcher confirmed, many in one statement, with a
-- timeline event each. Transition: none (launching|running, launched_at set).
-- Guards: b.attempt = i.attempt (a late record of attempt N must not mark attempt N+1 launched),
-- status launching or running, launched_at IS NULL (recorded once).
-- The status guard names the statuses it excludes (the table's CHECK allows six): written as
-- status IN ('launching', 'running'), it let the planner scan every live build through the
-- builds_live index and join the batch to each, whenever the table's statistics predated a burst
-- (estimating a handful of live builds where there were thousands: 7 ms for 6 launches with 2,000
-- live). Here only the primary key can find the rows, one lookup a launch, whatever the statistics
-- say (SqlTest.theLaunchRecordFindsItsBuildsByPrimaryKey).
WITH i AS (
  SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[])
    AS i(id, attempt, kind, name, namespace, detail)
  ORDER BY id
), b AS (
  UPDATE oneshot.builds b
  SET launched_at = clock_timestamp(), launch_kind = i.kind, launch_name = i.name,
      launch_namespace = i.namespace
  FROM i
  WHERE b.id = i.id AND b.attempt = i.attempt
    AND b.status NOT IN ('pending', 'succeeded', 'failed', 'canceled')
    AND b.launched_at IS NULL
  RETURNING b.id, b.attempt, b.status, i.detail,
            extract(epoch FROM b.launched_at - b.created_at)::float8 AS dispatch
), e AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT id, attempt, status, status, detail FROM b ORDER BY id
)
SELECT id, dispatch FROM b
