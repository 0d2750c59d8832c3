-- The version the running attempt's next state upload is stored as: the version this attempt wrote
-- already, else the next one of its route's workspace; the state is sealed bound to it
-- (Sealer.workspaceState) before state/save stores it, which stores it only as that version.
-- Transition: none (read).
-- Guards: token_hash = $1, status = 'running', runner_id = $2, workspace IS NOT NULL (as
-- state/save: nothing for a token or runner that could not store).
SELECT b.route, b.workspace,
       coalesce((SELECT s.version FROM oneshot.workspace_states s
                 WHERE s.build_id = b.id AND s.attempt = b.attempt),
                coalesce((SELECT max(w.version) FROM oneshot.workspace_states w
                          WHERE w.route = b.route AND w.workspace = b.workspace), 0) + 1) AS version
FROM oneshot.builds b
WHERE b.token_hash = $1 AND b.status = 'running' AND b.runner_id = $2 AND b.workspace IS NOT NULL
