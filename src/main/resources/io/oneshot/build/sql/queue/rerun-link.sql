-- Rerun, step 3: links the new build ($1), enqueued in this transaction through oneshot.enqueue(),
-- to the original ($2). Transition: none (the new build stays pending).
-- Guard: the new build is still as enqueued (attempt 0, pending, not linked).
UPDATE oneshot.builds SET rerun_of = $2
WHERE id = $1 AND attempt = 0 AND status = 'pending' AND rerun_of IS NULL
