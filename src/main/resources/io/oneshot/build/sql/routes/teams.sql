-- Routes mirror, step 3: the teams (db/019_fair_share.sql): every configured team and every route
-- that names none (a team of its own, weight 1), as arrays ($1 names, $2 weights, $3 guaranteed,
-- $4 borrow limits, $5 caps); teams no longer there go. A team's hold is the operator's: kept.
-- Transition: none (configuration).
WITH t AS (
  SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::int[])
    AS t(name, weight, guaranteed, borrow_limit, max_concurrent)
), gone AS (
  DELETE FROM oneshot.teams x WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.name = x.name)
)
INSERT INTO oneshot.teams AS x (name, weight, guaranteed, borrow_limit, max_concurrent, updated_at)
SELECT name, weight, guaranteed, borrow_limit, max_concurrent, now() FROM t
ON CONFLICT (name) DO UPDATE SET
  weight = excluded.weight, guaranteed = excluded.guaranteed, borrow_limit = excluded.borrow_limit,
  max_concurrent = excluded.max_concurrent, updated_at = now()
