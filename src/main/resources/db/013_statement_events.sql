-- The queue's busiest transitions write their own timeline rows. A PL/pgSQL trigger call a row
-- (its NEW and OLD copied into records, its INSERT started and ended through SPI) was a sixth of
-- PostgreSQL's CPU in the drain, where each statement moves 12 to 26 builds: the claim
-- (queue/claim.sql), and the runners' acquires and completions written together
-- (runner/acquire-many.sql, runner/complete-many.sql) now insert their events in the statement
-- itself, one INSERT for all their rows, and say so for their transaction by setting
-- oneshot.events to 'written'; builds_record_transition leaves such a transaction's changes alone.
-- Each of those statements is the last of its transaction, so the setting reaches nothing else.
-- Every other writer (producers, the rescuer, cancels, a runner's call written alone, SQL by hand)
-- is recorded by the trigger as before.
--
-- The check's WHEN condition compares the change with the legal ones as one text each, so that
-- PostgreSQL looks it up in a hash table built once per statement instead of comparing it with
-- every legal pair in turn. As in 011, a migration that changes build_transitions must run this
-- block again.
DO $$
DECLARE
  legal text;
BEGIN
  SELECT string_agg(quote_literal(from_status || '>' || to_status), ', '
                    ORDER BY from_status, to_status)
  INTO legal FROM oneshot.build_transitions;
  DROP TRIGGER builds_check_transition ON oneshot.builds;
  EXECUTE format(
    'CREATE TRIGGER builds_check_transition BEFORE UPDATE OF status ON oneshot.builds '
    'FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status '
    'AND (OLD.status || ''>'' || NEW.status) NOT IN (%s)) '
    'EXECUTE FUNCTION oneshot.check_transition()', legal);
END
$$;

DROP TRIGGER builds_record_transition ON oneshot.builds;
CREATE TRIGGER builds_record_transition AFTER UPDATE OF status ON oneshot.builds
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                     AND current_setting('oneshot.events', true) IS DISTINCT FROM 'written')
  EXECUTE FUNCTION oneshot.record_transition();
