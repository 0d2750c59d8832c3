-- Cancel, in the same transaction: wakes the dispatcher (channel oneshot_cancel, payload the build id)
-- so that it removes the attempt without waiting for a tick. Transition: none.
SELECT 1 FROM pg_notify('oneshot_cancel', $1)
