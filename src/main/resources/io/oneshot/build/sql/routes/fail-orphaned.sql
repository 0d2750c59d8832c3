-- Routes mirror, step 4: builds still queued for a route the configuration no longer has would wait
-- forever; they fail, saying why.
-- Transition: pending -> failed.
-- Guard: status = 'pending' (a build already claimed keeps its attempt) and the route not configured.
UPDATE oneshot.builds
SET status = 'failed', finished_at = clock_timestamp(),
    error = format('route %s no longer exists in the dispatcher''s configuration', route),
    reason = format('route %s no longer exists in the dispatcher''s configuration', route)
WHERE status = 'pending' AND NOT (route = ANY ($1::text[]))
RETURNING route
