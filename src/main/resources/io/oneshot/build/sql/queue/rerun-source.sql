-- Rerun, step 1: what the new build copies from the original (its input, tags, priority,
-- workspace and sealed sensitive values) and whether the original has finished; the row is held until the new build is linked.
-- Transition: none (read).
SELECT status, tags::text AS tags, input::text AS input, priority, workspace, sealed
FROM oneshot.builds WHERE id = $1 FOR SHARE
