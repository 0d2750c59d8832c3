-- A source's running builds not yet marked as having taken a job: for a coder source, whose
-- daemons Coder's own tables may say took one (a report lost with a dispatcher that died).
-- $1 source. Transition: none (read).
SELECT id, attempt, input->>'organization' AS organization
FROM oneshot.builds
WHERE source = $1 AND status = 'running' AND source_taken_at IS NULL
