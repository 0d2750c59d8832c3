-- Routes mirror, step 2: writes one configured route, in its position, for oneshot.enqueue() to bind
-- builds to and for the claim to count against, with what its builds may ask for their own pod
-- (db/018_pod_settings.sql; null: nothing), its team ($12, db/019_fair_share.sql: its own name
-- when it names none) and its cluster ($13, db/022_clusters.sql). Its hold is the operator's: kept;
-- its stall is kept while its cluster is the same (the leader writes it). Transition: none
-- (configuration).
INSERT INTO oneshot.routes AS r (name, position, tags, template, max_concurrent, max_attempts,
                                 timeout_ms, cancel_grace_ms, retry_after_acquire, untagged, pod_rules,
                                 team, cluster, updated_at)
VALUES ($1, $2, $3::text::jsonb, $4, $5, $6, $7, $8, $9, $10, $11::text::jsonb, $12, $13, now())
ON CONFLICT (name) DO UPDATE SET
  position = excluded.position, tags = excluded.tags, template = excluded.template,
  max_concurrent = excluded.max_concurrent, max_attempts = excluded.max_attempts,
  timeout_ms = excluded.timeout_ms, cancel_grace_ms = excluded.cancel_grace_ms,
  retry_after_acquire = excluded.retry_after_acquire, untagged = excluded.untagged,
  pod_rules = excluded.pod_rules, team = excluded.team, cluster = excluded.cluster,
  stalled = CASE WHEN r.cluster = excluded.cluster THEN r.stalled END,
  stalled_at = CASE WHEN r.cluster = excluded.cluster THEN r.stalled_at END,
  updated_at = now()
