-- A workspace belongs to the route its builds run on: team A's `prod` and team B's `prod` are two
-- workspaces, each with its own state, versions and one-build-at-a-time rule, and neither team's
-- builds wait for, read or lock the other's. Until now a workspace was its name alone, so the first
-- route to use a name held it. Each stored version goes to the route of the build that wrote it (a
-- name two routes shared keeps each route's versions, numbered as they were).
ALTER TABLE oneshot.workspace_states ADD COLUMN route text;
UPDATE oneshot.workspace_states s SET route = b.route FROM oneshot.builds b WHERE b.id = s.build_id;
ALTER TABLE oneshot.workspace_states ALTER COLUMN route SET NOT NULL;
ALTER TABLE oneshot.workspace_states DROP CONSTRAINT workspace_states_pkey;
ALTER TABLE oneshot.workspace_states ADD PRIMARY KEY (route, workspace, version);

-- One live build per workspace of a route, in enqueue order.
DROP INDEX oneshot.builds_workspace;
CREATE INDEX builds_workspace ON oneshot.builds (route, workspace, id)
  WHERE workspace IS NOT NULL AND status IN ('pending', 'launching', 'running');

-- A workspace named without its route: the routes that have it.
CREATE INDEX workspace_states_workspace ON oneshot.workspace_states (workspace);

-- During a rolling upgrade a replica of the previous version still stores states without a route:
-- each gets the route of the build that writes it, as the statements of this version give it.
CREATE FUNCTION oneshot.workspace_state_route() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.route IS NULL THEN
    NEW.route := (SELECT b.route FROM oneshot.builds b WHERE b.id = NEW.build_id);
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER workspace_states_route BEFORE INSERT ON oneshot.workspace_states
  FOR EACH ROW EXECUTE FUNCTION oneshot.workspace_state_route();
