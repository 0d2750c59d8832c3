-- Warm capacity (docs/warm-capacity.md): what the leader last counted and saw of each warm route's
-- balloons, so that every replica answers `oneshot routes`, the console and the API the same; and
-- what they cost, by the hour.
CREATE TABLE oneshot.route_warmth (
  route      text PRIMARY KEY,
  -- The balloons the leader asks for, and why (the rule that decided and what bounded it).
  wanted     integer NOT NULL,
  why        text NOT NULL,
  -- The balloons running (holding room on a node) and pending (waiting for room: a node to come).
  running    integer NOT NULL,
  pending    integer NOT NULL,
  -- What keeps the balloons from being kept (a PriorityClass missing, the API refusing), or null.
  trouble    text,
  updated_at timestamptz NOT NULL
);

-- Balloon time and preemptions per route and hour: balloon-hours over the last day, and how often
-- a build's pod took a balloon's place. Kept for eight days by the leader.
CREATE TABLE oneshot.balloon_usage (
  route           text NOT NULL,
  hour            timestamptz NOT NULL,
  balloon_seconds double precision NOT NULL DEFAULT 0,
  preemptions     integer NOT NULL DEFAULT 0,
  PRIMARY KEY (route, hour)
);
