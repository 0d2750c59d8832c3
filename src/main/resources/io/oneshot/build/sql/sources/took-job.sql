-- A runner of a source's build took a job: the build no longer counts as in flight for its tag set
-- (the job it holds left the source's waiting count), and the timeline says so, once. The sources
-- are woken: a look that counted this build in flight may have left a newer job without a build.
-- $1 token hash, $2 runner, $3 what it took. Transition: none (running stays running).
-- Guards: token_hash = $1 (one attempt), status = 'running', runner_id = $2 (the bound runner);
-- source_taken_at IS NULL (marked once). No row: not this runner's running attempt.
WITH b AS (
  SELECT id, source, source_taken_at FROM oneshot.builds
  WHERE token_hash = $1 AND status = 'running' AND runner_id = $2
  FOR UPDATE
), taken AS (
  UPDATE oneshot.builds x SET source_taken_at = clock_timestamp()
  FROM b WHERE x.id = b.id AND b.source IS NOT NULL AND b.source_taken_at IS NULL
  RETURNING x.id, x.attempt, x.status
), event AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT id, attempt, status, status, $3 FROM taken
  RETURNING build_id
)
SELECT b.id, (SELECT count(*) FROM taken) AS marked,
       (SELECT count(pg_notify('oneshot_builds', '')) FROM event) AS woken
FROM b
