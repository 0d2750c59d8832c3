-- Whose Coder job a token's running build is: its coder source and organization, from the input a
-- coder source enqueued (source/QueueSource), for reading the job's outcome from Coder's tables
-- before the completion is written. No row: not a running coder build of its runner.
-- Transition: none (read).
SELECT id, attempt, input->>'source' AS source, input->>'organization' AS organization
FROM oneshot.builds
WHERE token_hash = $1 AND runner_id = $2 AND status = 'running'
  AND input->>'provisioner' = 'coder'
