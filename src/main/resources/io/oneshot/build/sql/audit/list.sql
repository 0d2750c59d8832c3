-- The audit trail, newest first, filtered by actor ($1), action ($2), build ($3) and outcome ($4;
-- 'refused': every refusal) when given, before entry $5 (keyset paging), at most $6 entries.
-- Transition: none (read).
SELECT id, at, actor, action, outcome, build_id, route, workspace, detail::text AS detail
FROM oneshot.audit
WHERE ($1::text IS NULL OR actor = $1) AND ($2::text IS NULL OR action = $2)
  AND ($3::bigint IS NULL OR build_id = $3)
  AND ($4::text IS NULL OR outcome = $4 OR ($4 = 'refused' AND outcome <> 'ok'))
  AND ($5::bigint IS NULL OR id < $5)
ORDER BY id DESC LIMIT $6
