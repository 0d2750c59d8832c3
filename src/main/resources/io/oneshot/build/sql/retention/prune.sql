-- Retention: deletes up to $4 finished builds of route $1, oldest first, with their logs and
-- timelines (the trigger builds_delete_history, db/012): those finished more than $2 ms ago
-- (null: whatever their age) and those beyond the route's newest $3 finished builds (0: no cap).
-- A build whose terraform state a workspace keeps is kept with it. Rows another transaction holds
-- are left for the next batch. Transition: succeeded | failed | canceled -> (deleted).
WITH newest AS (
  SELECT k.finished_at, k.id FROM oneshot.builds k
  WHERE k.route = $1 AND k.status IN ('succeeded', 'failed', 'canceled')
  ORDER BY k.finished_at DESC, k.id DESC
  OFFSET greatest($3 - 1, 0) LIMIT 1
), doomed AS (
  SELECT b.id FROM oneshot.builds b
  WHERE b.route = $1 AND b.status IN ('succeeded', 'failed', 'canceled')
    AND (b.finished_at < now() - make_interval(secs => $2::bigint / 1000.0)
         OR ($3 > 0 AND (b.finished_at, b.id) < (SELECT n.finished_at, n.id FROM newest n)))
    AND NOT EXISTS (SELECT 1 FROM oneshot.workspace_states s WHERE s.build_id = b.id)
  ORDER BY b.finished_at, b.id
  LIMIT $4
  FOR UPDATE OF b SKIP LOCKED
)
DELETE FROM oneshot.builds b USING doomed d WHERE b.id = d.id
RETURNING b.id
