-- The runner an attempt belongs to. The first acquire binds the attempt to the provisionerd
-- process that made it (a random id per process; in a pod, also the pod's name and UID); every
-- later runner call of that attempt is accepted from that runner alone. A second process holding
-- the same token (a replaced pod, a copied manifest, `kubectl debug --copy-to`) is refused
-- before it runs anything. The claim clears these columns for each new attempt.
ALTER TABLE oneshot.builds
  ADD COLUMN runner_id text,
  -- What the runner said of itself, for messages: {"pod", "podUid", "host", "pid"}.
  ADD COLUMN runner jsonb,
  ADD COLUMN runner_since timestamptz;

-- Builds running when this migration is applied were acquired by a provisionerd that names no
-- runner: they are bound to none that can call, so the rescuer ends them once their heartbeats
-- stop, as it would any runner it no longer hears from.
UPDATE oneshot.builds SET runner_id = 'unnamed (acquired before runners were bound)',
                          runner_since = started_at
WHERE status = 'running';

-- A running build always has its runner.
ALTER TABLE oneshot.builds
  ADD CONSTRAINT builds_running_has_runner CHECK (status <> 'running' OR runner_id IS NOT NULL);
