-- Gives a claimed build whose token was lost (the dispatcher stopped between claim and launch) a new
-- one, before launching it again. Transition: none (launching, new token hash).
-- Guards: attempt = $2, status = 'launching', launched_at IS NULL (a launched attempt's pod holds the
-- old token, which must keep working).
UPDATE oneshot.builds SET token_hash = $3
WHERE id = $1 AND attempt = $2 AND status = 'launching' AND launched_at IS NULL
