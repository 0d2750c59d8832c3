-- Where the current (or last) attempt runs: the pod of its Job (or the process), so that
-- `oneshot builds show` can say which `kubectl logs` reads the build.
ALTER TABLE oneshot.builds ADD COLUMN launch_pod text;
