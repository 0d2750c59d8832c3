-- The build's own pod settings (input.pod as its enqueue let it through), for a launch made again
-- after its dispatcher stopped before recording it (the claim hands them over otherwise).
-- Transition: none (read).
SELECT (input -> 'pod')::text AS pod FROM oneshot.builds WHERE id = $1
