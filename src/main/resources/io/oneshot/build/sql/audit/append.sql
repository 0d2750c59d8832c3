-- Appends one entry to the audit trail ($1 actor, $2 action, $3 outcome, $4 build, $5 route, $6
-- workspace, $7 detail). Transition: none (audit; the table refuses updates and deletes).
INSERT INTO oneshot.audit (actor, action, outcome, build_id, route, workspace, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb)
