-- Fewer, cheaper wakes. NOTIFY serializes every transaction that sends one behind a lock on the
-- database held through its commit (and so through its WAL flush): with builds draining fast,
-- runners' acquires and completions queued for that lock, not for the disk. So:
-- - an acquire (launching -> running) frees no capacity and wakes nobody;
-- - a statement that sets oneshot.wake to 'after-commit' for its transaction (the runner's
--   completion, runner/complete.sql) sends no notification here: its caller sends them once the
--   transaction committed, in a transaction of their own that does not wait for its WAL flush
--   (runner/wake.sql), so the lock is held for microseconds. If that caller dies in between, the
--   dispatcher's poll is the backstop, as for any lost notification.
-- Every other writer (producers, the rescuer, cancels, SQL by hand) is woken for as before.
CREATE OR REPLACE FUNCTION oneshot.record_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
    VALUES (NEW.id, NEW.attempt, NULL, NEW.status, NEW.reason);
    RETURN NULL;
  END IF;
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
    VALUES (NEW.id, NEW.attempt, OLD.status, NEW.status, NEW.reason);
    IF current_setting('oneshot.wake', true) IS NOT DISTINCT FROM 'after-commit' THEN
      RETURN NULL;
    END IF;
    -- Capacity freed or a build queued again: the dispatcher has work. NOTIFY folds equal
    -- payloads within a transaction, so a batch of transitions wakes it once.
    IF (OLD.status IN ('launching', 'running') AND NEW.status NOT IN ('launching', 'running'))
        OR NEW.status = 'pending' THEN
      PERFORM pg_notify('oneshot_builds', '');
    END IF;
    -- Log followers stop when the build ends.
    IF NEW.status IN ('succeeded', 'failed', 'canceled') THEN
      PERFORM pg_notify('oneshot_logs', NEW.id::text);
    END IF;
  END IF;
  RETURN NULL;
END
$$;
