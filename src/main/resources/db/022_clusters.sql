-- Several clusters (docs/clusters.md): the cluster each route launches into ('home': the
-- dispatcher's own), and why its builds cannot launch now (null: they can): the leading dispatcher
-- writes it when the route's cluster cannot be reached or refuses it (its credentials, its Role in
-- the route's namespace), and clears it when the cluster is fine again. The claim takes no build of
-- a stalled route (routes/stalled.sql, queue/claim.sql), and a queued build says why it waits.
ALTER TABLE oneshot.routes
  ADD COLUMN cluster text NOT NULL DEFAULT 'home',
  ADD COLUMN stalled text,
  ADD COLUMN stalled_at timestamptz;
