-- Every API token, without its hash, by name. Transition: none (read).
SELECT id, name, owner, role, routes, route_tags::text AS route_tags, created_at, expires_at,
       revoked_at, last_used_at
FROM oneshot.api_tokens ORDER BY name
