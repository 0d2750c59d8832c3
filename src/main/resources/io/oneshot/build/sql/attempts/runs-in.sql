-- Records the pod (or process) the current attempt runs in. Transition: none.
-- Guards: attempt = $2 (an old attempt's pod is not recorded over the current one's) and status
-- IN ('launching', 'running') (nothing is written once the build moved on).
UPDATE oneshot.builds SET launch_pod = $3
WHERE id = $1 AND attempt = $2 AND status IN ('launching', 'running')
