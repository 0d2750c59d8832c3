-- Routes mirror, step 2: writes one configured route, in its position, for oneshot.enqueue() to bind
-- builds to and for the claim to count against. Transition: none (configuration).
INSERT INTO oneshot.routes AS r (name, position, tags, template, max_concurrent, max_attempts,
                                 timeout_ms, cancel_grace_ms, retry_after_acquire, untagged, updated_at)
VALUES ($1, $2, $3::text::jsonb, $4, $5, $6, $7, $8, $9, $10, now())
ON CONFLICT (name) DO UPDATE SET
  position = excluded.position, tags = excluded.tags, template = excluded.template,
  max_concurrent = excluded.max_concurrent, max_attempts = excluded.max_attempts,
  timeout_ms = excluded.timeout_ms, cancel_grace_ms = excluded.cancel_grace_ms,
  retry_after_acquire = excluded.retry_after_acquire, untagged = excluded.untagged, updated_at = now()
