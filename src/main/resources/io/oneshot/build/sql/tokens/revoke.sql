-- Revokes the token named $1: from now on every call with it is refused. Transition: none
-- (access). Guard: revoked_at IS NULL (a second revoke changes nothing; its row says when the
-- first one was).
WITH t AS (SELECT id, revoked_at FROM oneshot.api_tokens WHERE name = $1),
u AS (
  UPDATE oneshot.api_tokens x SET revoked_at = clock_timestamp()
  FROM t WHERE x.id = t.id AND x.revoked_at IS NULL
  RETURNING x.revoked_at
)
SELECT t.id, coalesce((SELECT revoked_at FROM u), t.revoked_at) AS revoked_at,
       EXISTS (SELECT 1 FROM u) AS revoked_now
FROM t
