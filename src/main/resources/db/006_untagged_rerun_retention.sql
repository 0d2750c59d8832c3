-- Untagged builds go only to routes that take them. A route says so with `untagged` (like GitLab
-- Runner's run_untagged): by default a route without tags takes them and a route with tags does
-- not. Rows written before this migration keep taking them until the dispatcher mirrors its routes
-- again, as they did.
ALTER TABLE oneshot.routes ADD COLUMN untagged boolean NOT NULL DEFAULT true;

-- A rerun is a new build with the input, tags, priority and workspace of a finished one.
ALTER TABLE oneshot.builds
  ADD COLUMN rerun_of bigint REFERENCES oneshot.builds (id) ON DELETE SET NULL;
CREATE INDEX builds_rerun_of ON oneshot.builds (rerun_of) WHERE rerun_of IS NOT NULL;

CREATE OR REPLACE FUNCTION oneshot.enqueue(tags jsonb, input jsonb, priority int DEFAULT 0, workspace text DEFAULT NULL)
RETURNS oneshot.builds LANGUAGE plpgsql AS $$
DECLARE
  lim oneshot.limits;
  bound text;
  b oneshot.builds;
BEGIN
  SELECT * INTO lim FROM oneshot.limits;
  PERFORM oneshot.check_tags(enqueue.tags, lim.max_tags);
  PERFORM oneshot.check_input(enqueue.input, lim.max_input_bytes);
  IF enqueue.priority IS NULL OR enqueue.priority NOT BETWEEN -1000 AND 1000 THEN
    PERFORM oneshot.invalid('priority', format('must be an integer from -1000 to 1000, got %s',
      coalesce(enqueue.priority::text, 'null')));
  END IF;
  IF enqueue.workspace IS NOT NULL AND enqueue.workspace !~ '^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$' THEN
    PERFORM oneshot.invalid('workspace', format('%s is not a valid workspace key', to_jsonb(enqueue.workspace)),
      'a workspace key is 1 to 200 letters, digits, ''.'', ''_'', '':'', ''@'', ''/'' or ''-'', starting with a letter or digit');
  END IF;
  IF enqueue.tags = '{}'::jsonb THEN
    SELECT r.name INTO bound FROM oneshot.routes r WHERE r.untagged ORDER BY r.position LIMIT 1;
    IF bound IS NULL THEN
      PERFORM oneshot.invalid('tags', 'no route takes builds without tags',
        coalesce('give the build tags a route matches, or set untagged: true on a route; routes: '
          || (SELECT string_agg(format('%s %s', r.name, r.tags), ', ' ORDER BY r.position) FROM oneshot.routes r),
          'no routes are configured: start the dispatcher with a configuration that has routes'));
    END IF;
  ELSE
    SELECT r.name INTO bound FROM oneshot.routes r WHERE r.tags @> enqueue.tags ORDER BY r.position LIMIT 1;
  END IF;
  IF bound IS NULL THEN
    PERFORM oneshot.invalid('tags', format('no route matches %s', enqueue.tags),
      coalesce('a route matches when its tags contain all of the build''s tags; routes: '
        || (SELECT string_agg(format('%s %s', r.name, r.tags), ', ' ORDER BY r.position) FROM oneshot.routes r),
        'no routes are configured: start the dispatcher with a configuration that has routes'));
  END IF;
  INSERT INTO oneshot.builds (route, tags, input, priority, workspace, reason)
  VALUES (bound, enqueue.tags, enqueue.input, enqueue.priority, enqueue.workspace, 'enqueued')
  RETURNING * INTO b;
  RETURN b;
END
$$;

-- Retention deletes each route's finished builds oldest first.
CREATE INDEX builds_finished ON oneshot.builds (route, finished_at, id)
  WHERE status IN ('succeeded', 'failed', 'canceled');
