-- The encryption keys' checks (db/020_key_checks.sql): records one for each configured key that has
-- none ($1 key ids, $2 their checks), and answers those recorded before this statement (the rows it
-- inserts are not in its snapshot: a check just made needs no opening), the configured keys' and any
-- other's. Concurrent starts with the same new key: the first insert stands.
-- Transition: none.
WITH made AS (
  INSERT INTO oneshot.key_checks (key_id, sealed)
  SELECT * FROM unnest($1::text[], $2::text[])
  ON CONFLICT (key_id) DO NOTHING
)
SELECT key_id, sealed FROM oneshot.key_checks ORDER BY key_id
