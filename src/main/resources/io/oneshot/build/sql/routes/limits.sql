-- Routes mirror, step 3: the size caps oneshot.enqueue() checks every build against.
-- Transition: none (configuration).
UPDATE oneshot.limits SET max_input_bytes = $1, max_tags = $2, max_log_line_bytes = $3,
                          max_log_bytes = $4
