-- An attempt the rescuer removed (a hung or timed-out build's Job, a pod stuck at the launch
-- timeout, an orphan) is marked on its launch record: `builds show` and the console then stop
-- pointing `kubectl logs` at a Job that no longer exists, and say when and why it went.
ALTER TABLE oneshot.build_launches ADD COLUMN removed_at timestamptz, ADD COLUMN removed_why text;
