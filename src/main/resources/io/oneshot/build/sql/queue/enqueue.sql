-- Enqueue through oneshot.enqueue(), the function SQL producers call too, so that every producer gets
-- one validation (errors carry SQLSTATE OS400); the reason says what the enqueue changed of what the
-- build asked for (db/018_pod_settings.sql).
-- Transition: (new) -> pending.
SELECT id, status, route, reason FROM oneshot.enqueue($1::text::jsonb, $2::text::jsonb, $3, $4)
