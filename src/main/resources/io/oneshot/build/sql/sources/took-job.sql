-- A runner of a source's build took a job: the build no longer counts as in flight for its tag set
-- (the job it holds left the source's waiting count), and the timeline says so.
-- $1 build, $2 attempt, $3 runner, $4 what it took. Transition: none (running stays running).
-- Guards: status = 'running', attempt = $2, runner_id = $3, source_taken_at IS NULL (once).
WITH taken AS (
  UPDATE oneshot.builds SET source_taken_at = clock_timestamp()
  WHERE id = $1 AND attempt = $2 AND status = 'running' AND runner_id = $3
    AND source IS NOT NULL AND source_taken_at IS NULL
  RETURNING id, attempt, status
)
INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
SELECT id, attempt, status, status, $4 FROM taken
RETURNING build_id
