-- A build's input as it was submitted: for running it again by hand, or looking at what ran. Kept
-- out of the build view, which people and dashboards read often (a terraform module's files may
-- hold values that are not for every reader). Transition: none (read).
SELECT input::text AS input FROM oneshot.builds WHERE id = $1
