-- A fence that no longer holds aborts the transaction that checked it (queue/claim-lock.sql), so
-- that a claim can be sent in one round trip (BEGIN, the lock, the claim, COMMIT together): the
-- COMMIT of an aborted transaction rolls it back, and nothing a deposed leader claimed commits.
-- SQLSTATE OS412; the caller turns it into FencedOutException.
CREATE OR REPLACE FUNCTION oneshot.fenced_out(leader_pid int, leader_started timestamptz)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'OS412',
    MESSAGE = 'the leadership lock is no longer held by session ' || leader_pid
      || ' (started ' || leader_started || ')';
END $$;
