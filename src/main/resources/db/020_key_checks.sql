-- A check value per encryption key (docs/install.md, "With Argo CD or Flux"): a short text sealed
-- with the key when a dispatcher first starts with it. At each start, each configured key must open
-- its own check: a key whose secret changed (a Secret made again, as a tool that renders the chart
-- on every sync would) stops the start with the reason, rather than leaving every stored state and
-- sensitive value unopenable with nothing said until a build needs one.
CREATE TABLE oneshot.key_checks (
  key_id     text PRIMARY KEY,
  sealed     text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
