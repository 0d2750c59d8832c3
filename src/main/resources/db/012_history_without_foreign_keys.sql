-- A build's log lines and timeline events without foreign keys to oneshot.builds. PostgreSQL
-- checks a foreign key row by row, each check a query of its own: it was two thirds of the cost of
-- inserting a log line (100,000 lines in batches of 100: 0.42 s with it, 0.16 s without) and a
-- share of every transition's. The keys gave two things, both kept:
-- - No line or event for a build that is not there. Every statement that writes one holds its
--   build's row while it does: it changes that row in the same statement (the runner's calls, the
--   transitions and their trigger, system lines, the launch record), or locks it as the key's check
--   did (attempts/milestone.sql, FOR KEY SHARE). A build deleted meanwhile waits for that statement,
--   or the statement finds no build and writes nothing.
-- - A deleted build takes its lines and events with it: the trigger below deletes them in the
--   same statement as the builds, once for the statement rather than once a build.
ALTER TABLE oneshot.build_logs DROP CONSTRAINT build_logs_build_id_fkey;
ALTER TABLE oneshot.build_events DROP CONSTRAINT build_events_build_id_fkey;

CREATE FUNCTION oneshot.delete_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM oneshot.build_logs l USING gone g WHERE l.build_id = g.id;
  DELETE FROM oneshot.build_events e USING gone g WHERE e.build_id = g.id;
  RETURN NULL;
END
$$;

CREATE TRIGGER builds_delete_history AFTER DELETE ON oneshot.builds
  REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION oneshot.delete_history();
