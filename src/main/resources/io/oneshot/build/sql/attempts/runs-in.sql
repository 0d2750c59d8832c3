-- Records the pod (or process) the current attempt runs in. Transition: none.
-- Guard: attempt = $2 (an old attempt's pod is not recorded over the current one's).
UPDATE oneshot.builds SET launch_pod = $3 WHERE id = $1 AND attempt = $2
