-- Where a token's build stands, for telling a refused runner call why (409 with the holder, 410 for
-- an attempt that ended). Transition: none (read).
SELECT id, attempt, route, status, runner_id, runner::text AS runner, runner_since
FROM oneshot.builds WHERE token_hash = $1
