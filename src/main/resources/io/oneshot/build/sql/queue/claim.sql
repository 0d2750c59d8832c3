-- Claim, step 2: the next pending builds of every route with free slots, within the global limit ($1)
-- and the tokens at hand ($2), shared between teams by weight (db/019_fair_share.sql): within a
-- team by priority then age; across teams, each next slot to the team whose running and claimed
-- builds are fewest for its weight, a team's guaranteed slots first, none past its cap or past its
-- share and borrowLimit. Held routes and teams are skipped, and stalled routes (their cluster cannot
-- take launches now, db/022_clusters.sql); so are builds whose workspace has an
-- earlier build unfinished (a workspace is its route's, db/016_workspaces_by_route.sql). The caller
-- holds the claim lock, so the counts include every earlier claim.
-- Transition: pending -> launching, attempt + 1, a new token hash, runner binding cleared.
-- Guards: status = 'pending' under FOR UPDATE SKIP LOCKED; the route's maxConcurrent, the team's;
-- the global limit; the team's share and borrowing; holds; one live build per workspace of a route.
-- {{batch}}: the number of tokens, a constant for the planner.
-- The timeline's rows are written here, one INSERT for the batch (db/013_statement_events.sql):
-- "events" tells the transition's trigger so before any row changes, and this statement is the
-- last of the claim's transaction.
WITH events AS MATERIALIZED (
  SELECT set_config('oneshot.events', 'written', true) AS written
), live AS (
  SELECT route, count(*)::int AS n FROM oneshot.builds
  WHERE status IN ('launching', 'running') GROUP BY route
), room AS (
  -- What this claim may take in all (n): the global limit's free slots (free), and no more builds
  -- than it has tokens for. No route is read (or locked) past it, however deep its queue.
  SELECT least(f.free, cardinality($2::bytea[])) AS n, f.free
  FROM (SELECT greatest($1 - (SELECT coalesce(sum(n), 0) FROM live), 0)::int AS free) f
), route_team AS (
  -- Each route with its team (itself when it names none, db/019_fair_share.sql), whether the
  -- route or its team is held or the route stalled, and the team's rules.
  SELECT r.name, r.max_concurrent, coalesce(l.n, 0) AS live, coalesce(r.team, r.name) AS team,
         (r.held_at IS NOT NULL OR t.held_at IS NOT NULL OR r.stalled IS NOT NULL) AS held,
         coalesce(t.weight, 1) AS weight, coalesce(t.guaranteed, 0) AS guaranteed,
         t.borrow_limit, t.max_concurrent AS team_max
  FROM oneshot.routes r
  LEFT JOIN oneshot.teams t ON t.name = coalesce(r.team, r.name)
  LEFT JOIN live l ON l.route = r.name
), team AS (
  -- Each team: its live builds across its routes, and its share of the global limit by weight
  -- among every team (what it counts on when every team wants slots; its borrowing is counted
  -- past it). The most a team may run: its cap, and its share and borrowLimit, not under its
  -- guarantee.
  SELECT t.*, least(coalesce(t.team_max, 2147483647),
                    CASE WHEN t.borrow_limit IS NULL THEN 2147483647
                         ELSE greatest(t.guaranteed,
                                       ceil($1::float8 * t.weight / sum(t.weight) OVER ())::int
                                         + t.borrow_limit) END) AS most
  FROM (
    SELECT team, min(weight) AS weight, min(guaranteed) AS guaranteed,
           min(borrow_limit) AS borrow_limit, min(team_max) AS team_max, sum(live)::int AS live,
           bool_or(NOT held) AS open
    FROM route_team GROUP BY team
  ) t
), reserve AS (
  -- The guaranteed slots teams do not use: kept free for them, so no other team takes them.
  SELECT coalesce(sum(greatest(guaranteed - live, 0)), 0)::int AS n FROM team WHERE open
), free AS (
  SELECT rt.name, rt.team,
         least(greatest(rt.max_concurrent - rt.live, 0), greatest(t.most - t.live, 0),
               (SELECT n FROM room)) AS slots
  FROM route_team rt JOIN team t ON t.team = rt.team
  WHERE NOT rt.held
), eligible AS (
  -- Each route's builds it could launch now, up to its free slots, in launch order, read without
  -- locking them: what its team could take in this claim.
  SELECT f.team, c.id, c.priority
  FROM free f CROSS JOIN LATERAL (
    SELECT b.id, b.priority FROM oneshot.builds b
    WHERE b.status = 'pending' AND b.route = f.name
      AND (b.workspace IS NULL OR NOT EXISTS (
        SELECT 1 FROM oneshot.builds w
        WHERE w.route = b.route AND w.workspace = b.workspace AND w.id < b.id
          AND w.status IN ('pending', 'launching', 'running')))
    ORDER BY b.priority DESC, b.id
    LIMIT f.slots
  ) c
  WHERE f.slots > 0
), allotted AS (
  -- The slots this claim gives each team, as the pick below gives them: owed ones first, then the
  -- cheapest for the team's weight. Only that many of its builds are locked, not every route's
  -- next ones up to the room: over 50 teams, a claim of one locks one build, not 50.
  SELECT v.team, count(*)::int AS n FROM (
    SELECT d.team FROM (SELECT team, count(*)::int AS n FROM eligible GROUP BY team) d
    JOIN team t ON t.team = d.team
    CROSS JOIN LATERAL generate_series(1, least(d.n, greatest(t.most - t.live, 0),
                                                (SELECT n FROM room))) k
    ORDER BY (t.live + k) <= t.guaranteed DESC, (t.live + k)::float8 / t.weight, t.team
    LIMIT (SELECT n FROM room)
  ) v
  GROUP BY v.team
), candidates AS (
  -- Each team's best builds by priority then age, whichever of its routes, as many as it is
  -- given, locked; one another transaction changed or holds is passed over. Found by primary key:
  -- the status guard names the statuses it excludes (the table's CHECK allows six), so that no
  -- index on status can serve it (a plan made while the table was small scanned every pending
  -- build for each one, StalePlanTest). The row's ctid is where the update below finds it.
  SELECT b.id, b.ctid AS tid, b.priority, e.team
  FROM (
    SELECT e.*, row_number() OVER (PARTITION BY e.team ORDER BY e.priority DESC, e.id) AS r
    FROM eligible e
  ) e
  JOIN allotted a ON a.team = e.team AND e.r <= a.n
  JOIN oneshot.builds b
    ON b.id = e.id AND b.status NOT IN ('launching', 'running', 'succeeded', 'failed', 'canceled')
  FOR UPDATE OF b SKIP LOCKED
), ranked AS (
  -- Each candidate's place in its team: after the team's live builds, by priority then age; the
  -- slot it would be. Within its guarantee it is owed; past it, its cost is its place over its
  -- team's weight, so that slots go to teams in proportion to their weights.
  SELECT x.*, x.place <= x.guaranteed AS owed FROM (
    SELECT c.id, c.tid, c.priority, t.weight, t.guaranteed, t.most,
           t.live + row_number() OVER (PARTITION BY c.team ORDER BY c.priority DESC, c.id) AS place
    FROM candidates c JOIN team t ON t.team = c.team
  ) x
  WHERE x.place <= x.most
), picked AS (
  -- Owed slots first, then the cheapest: each next slot to the team with the fewest builds for
  -- its weight, within the team by priority then age. What is not owed takes no slot another
  -- team's unused guarantee keeps. The update below finds each by the ctid its lock saw (a TID
  -- scan, whatever the planner thinks of the table's size); the constant outer limit (the claim's
  -- batch size) still tells the planner how few rows come out.
  SELECT * FROM (
    SELECT id, tid,
           row_number() OVER (ORDER BY owed DESC, place::float8 / weight, priority DESC, id)::int AS n
    FROM (
      SELECT r.*,
             row_number() OVER (PARTITION BY owed ORDER BY place::float8 / weight, priority DESC, id)
               AS k
      FROM ranked r
    ) r
    WHERE owed OR k <= (SELECT free FROM room) - (SELECT n FROM reserve)
    ORDER BY owed DESC, place::float8 / weight, priority DESC, id
    LIMIT (SELECT n FROM room)
  ) x LIMIT {{batch}}
), claimed AS (
  UPDATE oneshot.builds b
  SET status = 'launching', attempt = b.attempt + 1, claimed_at = clock_timestamp(),
      started_at = NULL, heartbeat_at = NULL, runner_log_seq = 0,
      state_read_version = NULL, launch_pod = NULL,
      runner_id = NULL, runner = NULL, runner_since = NULL,
      launch_kind = $3,
      launch_name = 'oneshot-' || b.id || '-' || (b.attempt + 1),
      token_hash = ($2::bytea[])[p.n], reason = 'claimed by the dispatcher'
  FROM picked p, events
  WHERE b.ctid = p.tid AND b.id = p.id AND events.written IS NOT NULL
  RETURNING b.id, b.attempt, b.route, b.launch_name, b.reason, p.n,
            extract(epoch FROM b.claimed_at - b.created_at)::float8 AS wait,
            (b.input -> 'pod')::text AS pod
), timeline AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
  SELECT id, attempt, 'pending', 'launching', reason FROM claimed ORDER BY id
)
-- In the order the builds launch (owed, then fewest for their team's weight, priority, age): UPDATE
-- ... RETURNING answers in the table's order, and the dispatcher starts its launches in the order
-- it reads here.
SELECT id, attempt, route, launch_name, n, wait, pod FROM claimed ORDER BY n
