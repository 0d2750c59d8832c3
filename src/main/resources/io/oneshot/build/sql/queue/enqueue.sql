-- Enqueue through oneshot.enqueue(), the function SQL producers call too, so that every producer gets
-- one validation (errors carry SQLSTATE OS400).
-- Transition: (new) -> pending.
SELECT id, status, route FROM oneshot.enqueue($1::text::jsonb, $2::text::jsonb, $3, $4)
