-- Terraform state per workspace, versioned: every build that writes a workspace's state adds
-- one version (updated in place while that build runs, so that a partial apply is never lost),
-- and the history stays.

CREATE TABLE oneshot.workspace_states (
  workspace   text NOT NULL,
  version     int NOT NULL CHECK (version >= 1),
  build_id    bigint NOT NULL REFERENCES oneshot.builds (id),
  attempt     int NOT NULL,
  state       text NOT NULL,
  bytes       int NOT NULL,
  -- terraform's own counters, for showing and for refusing an older upload over a newer one
  serial      bigint,
  lineage     text,
  -- false while the build that writes it runs; true once it reported its outcome
  final       boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (workspace, version),
  UNIQUE (build_id, attempt)
);

ALTER TABLE oneshot.builds
  ADD COLUMN state_read_version int,
  ADD COLUMN state_written_version int;

