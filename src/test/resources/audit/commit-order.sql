-- Numbers every build event in the order its transaction committed, for the concurrency audits
-- (io.oneshot.testing.Limits, scripts/lib/audit.sh). Install it before the run: a deferred trigger,
-- run as each event-writing transaction commits, takes a lock held until the commit ends and draws
-- the next number. Ordering by the time a statement ran instead would under-count: an end written
-- early but committed late would free its slot too soon in the replay.
CREATE SCHEMA IF NOT EXISTS oneshot_audit;
CREATE TABLE IF NOT EXISTS oneshot_audit.commit_order (
  event_id bigint PRIMARY KEY, seq bigint NOT NULL);
CREATE SEQUENCE IF NOT EXISTS oneshot_audit.commit_seq;
CREATE OR REPLACE FUNCTION oneshot_audit.stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Held until the commit ends: the numbers follow commit order. The key is "oneshot" in ASCII.
  PERFORM pg_advisory_xact_lock(31365104421859188);
  INSERT INTO oneshot_audit.commit_order VALUES (NEW.id, nextval('oneshot_audit.commit_seq'))
    ON CONFLICT (event_id) DO UPDATE SET seq = excluded.seq;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS audit_commit_order ON oneshot.build_events;
CREATE CONSTRAINT TRIGGER audit_commit_order AFTER INSERT ON oneshot.build_events
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION oneshot_audit.stamp();
TRUNCATE oneshot_audit.commit_order;
