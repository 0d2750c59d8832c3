-- The transition triggers, called only where they have work to do. A PL/pgSQL call a row, with
-- the check's lookup of build_transitions run through SPI inside it, cost every status change
-- about as much as writing the row's new version; a trigger's WHEN condition is evaluated by the
-- executor itself.
-- - builds_check_transition runs only for a status change that build_transitions does not list,
--   so in practice only to raise its error: the list is written into the WHEN condition from the
--   table (a WHEN condition cannot read a table). A later migration that changes
--   build_transitions must run this block again; oneshot.check_transition() still reads the table,
--   so a transition added there and not yet here is only slower, never refused.
-- - builds_record_transition runs for an insert and for a real status change, not for an update
--   that sets the status it already had (a repeated acquire).
DO $$
DECLARE
  legal text;
BEGIN
  SELECT string_agg(format('(%L, %L)', from_status, to_status), ', '
                    ORDER BY from_status, to_status)
  INTO legal FROM oneshot.build_transitions;
  DROP TRIGGER builds_check_transition ON oneshot.builds;
  EXECUTE format(
    'CREATE TRIGGER builds_check_transition BEFORE UPDATE OF status ON oneshot.builds '
    'FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status '
    'AND (OLD.status, NEW.status) NOT IN (%s)) '
    'EXECUTE FUNCTION oneshot.check_transition()', legal);
END
$$;

DROP TRIGGER builds_record_transition ON oneshot.builds;
CREATE TRIGGER builds_record_insert AFTER INSERT ON oneshot.builds
  FOR EACH ROW EXECUTE FUNCTION oneshot.record_transition();
CREATE TRIGGER builds_record_transition AFTER UPDATE OF status ON oneshot.builds
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION oneshot.record_transition();
