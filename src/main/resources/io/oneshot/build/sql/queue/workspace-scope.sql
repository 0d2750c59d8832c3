-- Submit with a workspace, step 2 (a statement of its own, so that it sees what the lock waited
-- for): whether workspace $1 has builds, other than the new one ($3), on a route outside the
-- submitter's ($2). Transition: none (read).
SELECT EXISTS (
  SELECT 1 FROM oneshot.builds
  WHERE workspace = $1 AND id <> $3 AND NOT (route = ANY ($2::text[]))
) AS taken
