-- The token whose SHA-256 is $1, with whether it is expired or revoked; notes its use at most once
-- a minute, so that a busy client does not write a row per request. Transition: none (access).
WITH t AS (
  SELECT id, name, owner, role, routes, route_tags::text AS route_tags, created_at, expires_at,
         revoked_at, last_used_at
  FROM oneshot.api_tokens WHERE token_hash = $1
), used AS (
  UPDATE oneshot.api_tokens x SET last_used_at = clock_timestamp()
  FROM t
  WHERE x.id = t.id AND t.revoked_at IS NULL
    AND (t.last_used_at IS NULL OR t.last_used_at < clock_timestamp() - interval '1 minute')
)
SELECT t.*, t.expires_at IS NOT NULL AND t.expires_at <= clock_timestamp() AS expired FROM t
