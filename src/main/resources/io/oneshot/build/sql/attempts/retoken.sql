-- Gives a claimed build whose token was lost (the dispatcher stopped between claim and launch) a new
-- one, before launching it again. Transition: none (launching, new token hash).
-- Guards: attempt = $2, status = 'launching', no launch recorded for the attempt (a launched attempt's pod holds the
-- old token, which must keep working).
UPDATE oneshot.builds SET token_hash = $3
WHERE id = $1 AND attempt = $2 AND status = 'launching'
  AND NOT EXISTS (SELECT 1 FROM oneshot.build_launches l WHERE l.build_id = $1 AND l.attempt = $2)
