-- provisionerd's acquire: the first one moves the build to running and binds the attempt to the
-- calling runner; a repeated acquire by that runner gets the same answer (the same state version), so
-- a retried call is harmless. The row lock taken by "old" serializes two runners' acquires; its
-- strength is NO KEY UPDATE (nothing here changes a key), so that it does not wait for the attempt's launch
-- record, written at the same moment under FOR KEY SHARE (attempts/mark-launched.sql).
-- Transition: launching -> running (first acquire); running -> running (repeat).
-- Guards: token_hash = $1 with status IN ('launching', 'running') (only the current attempt's token
-- matches); runner_id IS NULL OR runner_id = $2 (one attempt, one runner: another runner finds the
-- holder in "old" and no row in "b"); id = $4 AND attempt = $5 when given (the runner was proven to
-- be the one launched for that attempt, Launcher.prove: a token used by the runner of another attempt
-- binds nothing; null only from a test's launcher, which proves nobody).
WITH old AS (
  SELECT id, attempt, route, status, runner_id, runner::text AS runner, runner_since
  FROM oneshot.builds
  WHERE token_hash = $1 AND status IN ('launching', 'running')
    AND ($4::bigint IS NULL OR (id = $4 AND attempt = $5::int))
  FOR NO KEY UPDATE
), b AS (
  UPDATE oneshot.builds x
  SET status = 'running', started_at = coalesce(x.started_at, clock_timestamp()),
      heartbeat_at = clock_timestamp(),
      runner_id = $2, runner = coalesce(x.runner, $3::text::jsonb),
      runner_since = coalesce(x.runner_since, clock_timestamp()),
      reason = CASE WHEN x.status = 'launching' THEN 'acquired by provisionerd' ELSE x.reason END,
      state_read_version =
        CASE WHEN x.workspace IS NULL OR x.input->>'provisioner' NOT IN ('terraform', 'pulumi') THEN NULL
             ELSE coalesce(x.state_read_version,
                           (SELECT max(w.version) FROM oneshot.workspace_states w
                            WHERE w.route = x.route AND w.workspace = x.workspace), 0) END
  FROM old
  WHERE x.id = old.id AND (x.runner_id IS NULL OR x.runner_id = $2)
  RETURNING x.id, x.attempt, x.route, x.workspace, x.input::text AS input, x.sealed,
            x.cancel_requested_at IS NOT NULL AS cancel_requested, x.state_read_version,
            old.status = 'launching' AS first,
            extract(epoch FROM x.started_at - (SELECT l.launched_at FROM oneshot.build_launches l
                                                 WHERE l.build_id = x.id AND l.attempt = x.attempt)
                    )::float8 AS start_seconds
)
SELECT old.id AS held_id, old.attempt AS held_attempt, old.route AS held_route,
       old.runner_id AS held_by, old.runner AS held_runner, old.runner_since AS held_since,
       b.*, coalesce(r.timeout_ms, 3600000) AS timeout_ms,
       coalesce(r.cancel_grace_ms, 60000) AS cancel_grace_ms, w.state
FROM old
LEFT JOIN b ON b.id = old.id
LEFT JOIN oneshot.routes r ON r.name = b.route
LEFT JOIN oneshot.workspace_states w
  ON w.route = b.route AND w.workspace = b.workspace AND w.version = b.state_read_version
