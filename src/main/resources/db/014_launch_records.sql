-- The launch record (the launcher confirmed an attempt) leaves the build's row alone: it is a row
-- of its own, one an attempt, inserted while the build's row is held FOR KEY SHARE only.
--
-- Written into the build's row, the record took that row's update lock, and so did the runner's
-- acquire: a runner that acquired within a millisecond of its launch (a simulated one, or a pod
-- whose launch record waited in a burst) waited for the record's commit, and its next call for the
-- acquire's, and each statement that wrote many rows at once for the slowest of them. In the
-- drain, the acquires written together took 2.4 ms a statement against 0.85 ms on the same rows
-- alone. FOR KEY SHARE conflicts with neither the runners' calls (FOR NO KEY UPDATE: they change
-- no key) nor another record; it still keeps the build from being deleted while its record and
-- timeline row are written (db/012), and still waits for, or is skipped by, a statement that
-- changes the build's token (the claim, a requeue, a new token) or locks it FOR UPDATE (a cancel,
-- the pruner).
--
-- Keyed by attempt, a record needs no clearing when the build is claimed again or requeued: each
-- attempt finds its own, or none. Readers join it on (build_id, attempt).
CREATE TABLE oneshot.build_launches (
  build_id     bigint NOT NULL,
  attempt      int NOT NULL,
  launched_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  kind         text NOT NULL,
  name         text NOT NULL,
  namespace    text,
  PRIMARY KEY (build_id, attempt)
);

-- The current attempts already launched keep their record; earlier attempts had none.
INSERT INTO oneshot.build_launches (build_id, attempt, launched_at, kind, name, namespace)
SELECT id, attempt, launched_at, coalesce(launch_kind, 'unknown'), coalesce(launch_name, ''),
       launch_namespace
FROM oneshot.builds WHERE launched_at IS NOT NULL;

ALTER TABLE oneshot.builds DROP COLUMN launched_at, DROP COLUMN launch_namespace;

-- A deleted build takes its launch records with it, as its log lines and timeline (db/012).
CREATE OR REPLACE FUNCTION oneshot.delete_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM oneshot.build_logs l USING gone g WHERE l.build_id = g.id;
  DELETE FROM oneshot.build_events e USING gone g WHERE e.build_id = g.id;
  DELETE FROM oneshot.build_launches r USING gone g WHERE r.build_id = g.id;
  RETURN NULL;
END
$$;
