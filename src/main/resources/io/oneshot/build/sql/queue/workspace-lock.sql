-- Submit with a workspace by a token that covers some routes only, step 1: serializes the
-- submitters of workspace $1 until commit, so that two teams cannot both take a new workspace.
-- Transition: none (lock).
SELECT pg_advisory_xact_lock(hashtext('oneshot.workspace'), hashtext($1))
