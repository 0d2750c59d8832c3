-- The workspaces: each route's workspace with state (its latest version, how many, when it changed)
-- or with unfinished builds (a workspace's first build has no state yet), and who holds it: its
-- earliest unfinished build (the one the others wait behind, as the claim orders them), with the
-- builds that wait behind it (how many, and the first five). Busy workspaces first, then the newest
-- change. $1: a token's routes, null for all.
-- Transition: none (read).
WITH states AS (
  SELECT s.route, s.workspace, max(s.version) AS latest, count(*) AS versions,
         max(s.updated_at) AS updated_at
  FROM oneshot.workspace_states s
  WHERE $1::text[] IS NULL OR s.route = ANY ($1::text[])
  GROUP BY s.route, s.workspace
), live AS (
  SELECT b.route, b.workspace,
         (array_agg(b.id ORDER BY b.id))[1] AS holder,
         (array_agg(b.status ORDER BY b.id))[1] AS holder_status,
         (array_agg(b.created_at ORDER BY b.id))[1] AS busy_since,
         count(*) - 1 AS waiting,
         (array_agg(b.id ORDER BY b.id))[2:6] AS waiting_ids
  FROM oneshot.builds b
  WHERE b.status IN ('pending', 'launching', 'running') AND b.workspace IS NOT NULL
    AND ($1::text[] IS NULL OR b.route = ANY ($1::text[]))
  GROUP BY b.route, b.workspace
)
SELECT coalesce(s.route, l.route) AS route, coalesce(s.workspace, l.workspace) AS workspace,
       s.latest, coalesce(s.versions, 0) AS versions, s.updated_at,
       l.holder, l.holder_status, l.busy_since, coalesce(l.waiting, 0) AS waiting, l.waiting_ids
FROM states s
FULL JOIN live l ON l.route = s.route AND l.workspace = s.workspace
ORDER BY l.holder IS NULL, coalesce(s.updated_at, l.busy_since) DESC
LIMIT 500
