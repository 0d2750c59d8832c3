-- Routes mirror, step 1: forgets the routes the configuration no longer has.
-- Transition: none (configuration). $1: the configured route names.
DELETE FROM oneshot.routes WHERE NOT (name = ANY ($1::text[]))
