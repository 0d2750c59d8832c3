-- A new API token ($1 name, $2 owner note, $3 role, $4 route names, $5 route tags, $6 expiry, $7
-- the token's SHA-256). Transition: none (access). A taken name is a unique violation on name.
INSERT INTO oneshot.api_tokens (name, owner, role, routes, route_tags, expires_at, token_hash)
VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, $7)
RETURNING id, name, owner, role, routes, route_tags::text AS route_tags, created_at, expires_at,
          revoked_at, last_used_at
