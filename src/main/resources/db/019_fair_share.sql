-- Fair share between teams (docs/fair-share.md). A team is the routes that share one weight: when
-- the global limit is contended, free slots go to teams in proportion to their weights, counting
-- what each runs; a team's guaranteed slots come first; what a team does not use, others borrow, up
-- to their borrowLimit; nothing running is stopped. A route that names no team is a team of its own,
-- of weight 1. Written by the dispatcher at start from its configuration, as the routes are.
CREATE TABLE oneshot.teams (
  name           text PRIMARY KEY,
  weight         integer NOT NULL CHECK (weight >= 1),
  -- Slots of the global limit the team may always use, before any share is counted.
  guaranteed     integer NOT NULL DEFAULT 0 CHECK (guaranteed >= 0),
  -- Slots beyond its share the team may borrow while others leave theirs idle (null: any).
  borrow_limit   integer CHECK (borrow_limit >= 0),
  -- A hard cap on the team's builds at once, across its routes (null: its routes' own).
  max_concurrent integer CHECK (max_concurrent >= 0),
  -- An operator's hold: no build of the team is claimed until it is released (queued ones stay).
  held_at        timestamptz,
  held_by        text,
  held_why       text,
  updated_at     timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE oneshot.routes
  ADD COLUMN team text,
  ADD COLUMN held_at timestamptz,
  ADD COLUMN held_by text,
  ADD COLUMN held_why text;
