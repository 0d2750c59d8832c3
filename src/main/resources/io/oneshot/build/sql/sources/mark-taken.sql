-- A source's running build took a job, as the source itself says (Coder's tables: the job's
-- worker is the build's daemon): the build no longer counts as in flight for its tag set, and the
-- timeline says so, once. $1 build, $2 attempt, $3 what it took. Transition: none.
-- Guards: attempt = $2 (that attempt's daemon), status = 'running', source_taken_at IS NULL
-- (marked once, by whichever of this and the runner's own report comes first).
WITH taken AS (
  UPDATE oneshot.builds SET source_taken_at = clock_timestamp()
  WHERE id = $1 AND attempt = $2 AND status = 'running' AND source_taken_at IS NULL
  RETURNING id, attempt, status
), event AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT id, attempt, status, status, $3 FROM taken
  RETURNING build_id
)
SELECT (SELECT count(*) FROM taken) AS marked, (SELECT count(*) FROM event) AS said
