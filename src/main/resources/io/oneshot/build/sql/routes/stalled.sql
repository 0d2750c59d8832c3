-- Route stalls: writes why each route's builds cannot launch now ($2[i] for route $1[i]; null: they
-- can), as the leading dispatcher sees its clusters; when a stall began is kept while it lasts.
-- Transition: none (routes). Guard: only rows whose stall changed are written.
UPDATE oneshot.routes r
SET stalled = s.why,
    stalled_at = CASE WHEN s.why IS NULL THEN NULL ELSE coalesce(r.stalled_at, now()) END
FROM unnest($1::text[], $2::text[]) AS s(name, why)
WHERE r.name = s.name AND r.stalled IS DISTINCT FROM s.why
