-- Submit, last step: notes who submitted build $1 ($2 the token's name or 'admin', $3 the token),
-- stores its sensitive values sealed ($4) and appends the audit entry ($5 the action, submit or
-- rerun; $6 its detail), in the transaction that enqueued it.
-- Transition: none (the build stays pending). No guard: the build was made in this transaction, and
-- nothing else sees it before the commit.
WITH u AS (
  UPDATE oneshot.builds SET submitted_by = $2, submitted_token = $3, sealed = $4
  WHERE id = $1
  RETURNING id, route, workspace
)
INSERT INTO oneshot.audit (actor, action, outcome, build_id, route, workspace, detail)
SELECT $2, $5, 'ok', u.id, u.route, u.workspace, $6::text::jsonb FROM u
