-- The build queue: builds, their timeline, their logs, and the mirror of the dispatcher's
-- routes and limits that oneshot.enqueue() binds and validates against.
--
-- States (docs/state-machine.md; Java: io.oneshot.build.BuildState):
--   pending -> launching -> running -> succeeded | failed | canceled
--   launching/running -> pending (requeue), pending -> canceled | failed

CREATE TABLE oneshot.build_transitions (
  from_status text NOT NULL,
  to_status   text NOT NULL,
  PRIMARY KEY (from_status, to_status)
);

INSERT INTO oneshot.build_transitions (from_status, to_status) VALUES
  ('pending',   'launching'),
  ('pending',   'canceled'),
  ('pending',   'failed'),
  ('launching', 'running'),
  ('launching', 'pending'),
  ('launching', 'failed'),
  ('launching', 'canceled'),
  ('running',   'succeeded'),
  ('running',   'failed'),
  ('running',   'canceled'),
  ('running',   'pending');

-- Written by the dispatcher at start (io.oneshot.build.BuildStore#mirror), in config order.
CREATE TABLE oneshot.routes (
  name                 text PRIMARY KEY,
  position             int NOT NULL,
  tags                 jsonb NOT NULL,
  template             text,
  max_concurrent       int NOT NULL CHECK (max_concurrent >= 0),
  max_attempts         int NOT NULL CHECK (max_attempts >= 1),
  timeout_ms           bigint NOT NULL CHECK (timeout_ms > 0),
  cancel_grace_ms      bigint NOT NULL CHECK (cancel_grace_ms >= 0),
  retry_after_acquire  boolean NOT NULL DEFAULT false,
  updated_at           timestamptz NOT NULL DEFAULT now()
);

-- One row: the size caps from the dispatcher's config, so SQL producers get the same checks.
CREATE TABLE oneshot.limits (
  singleton             boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  max_input_bytes       int NOT NULL DEFAULT 1048576,
  max_tags              int NOT NULL DEFAULT 32,
  max_log_line_bytes    int NOT NULL DEFAULT 16384,
  max_log_bytes         bigint NOT NULL DEFAULT 67108864
);
INSERT INTO oneshot.limits DEFAULT VALUES;

CREATE TABLE oneshot.builds (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  status               text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'launching', 'running', 'succeeded', 'failed', 'canceled')),
  route                text NOT NULL,
  tags                 jsonb NOT NULL,
  input                jsonb NOT NULL,
  priority             int NOT NULL DEFAULT 0,
  workspace            text,
  -- The attempt the current (or last) launch belongs to; 0 until first claimed.
  attempt              int NOT NULL DEFAULT 0,
  -- Why the build is in its status: the reason of the last transition.
  reason               text,
  launch_kind          text,
  launch_name          text,
  launch_namespace     text,
  -- SHA-256 of the current attempt's runner token; the token itself is never stored.
  token_hash           bytea UNIQUE,
  created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
  claimed_at           timestamptz,
  launched_at          timestamptz,
  started_at           timestamptz,
  heartbeat_at         timestamptz,
  cancel_requested_at  timestamptz,
  finished_at          timestamptz,
  exit_code            int,
  error                text,
  outputs              jsonb,
  log_seq              bigint NOT NULL DEFAULT 0,
  log_bytes            bigint NOT NULL DEFAULT 0,
  -- The runner's own number of the last log line it delivered in the current attempt, so that a
  -- batch sent again after a lost reply is not stored twice.
  runner_log_seq       bigint NOT NULL DEFAULT 0,
  CHECK ((status IN ('succeeded', 'failed', 'canceled')) = (finished_at IS NOT NULL))
);

-- The claim: pending builds of a route by priority, then age.
CREATE INDEX builds_pending ON oneshot.builds (route, priority DESC, id) WHERE status = 'pending';
-- Capacity: live builds per route.
CREATE INDEX builds_live ON oneshot.builds (route) WHERE status IN ('launching', 'running');
-- One live build per workspace, in enqueue order.
CREATE INDEX builds_workspace ON oneshot.builds (workspace, id)
  WHERE workspace IS NOT NULL AND status IN ('pending', 'launching', 'running');
-- Listing.
CREATE INDEX builds_status ON oneshot.builds (status, id);

CREATE TABLE oneshot.build_events (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  build_id     bigint NOT NULL REFERENCES oneshot.builds (id) ON DELETE CASCADE,
  at           timestamptz NOT NULL DEFAULT clock_timestamp(),
  attempt      int NOT NULL,
  -- from_status is null for the enqueue; from_status = to_status marks a milestone within a
  -- state (the launcher confirmed the attempt, a pod was scheduled, ...).
  from_status  text,
  to_status    text NOT NULL,
  reason       text
);
CREATE INDEX build_events_build ON oneshot.build_events (build_id, id);

CREATE TABLE oneshot.build_logs (
  build_id  bigint NOT NULL REFERENCES oneshot.builds (id) ON DELETE CASCADE,
  seq       bigint NOT NULL,
  ts        timestamptz NOT NULL,
  attempt   int NOT NULL,
  stream    text NOT NULL CHECK (stream IN ('stdout', 'stderr', 'system')),
  level     text,
  stage     text,
  text      text NOT NULL,
  PRIMARY KEY (build_id, seq)
);

-- Every status change is checked against build_transitions and appended to build_events.
CREATE FUNCTION oneshot.check_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status <> OLD.status AND NOT EXISTS (
      SELECT 1 FROM oneshot.build_transitions t
      WHERE t.from_status = OLD.status AND t.to_status = NEW.status) THEN
    RAISE EXCEPTION 'build %: % -> % is not a legal transition', OLD.id, OLD.status, NEW.status
      USING ERRCODE = 'OS409';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER builds_check_transition BEFORE UPDATE OF status ON oneshot.builds
  FOR EACH ROW EXECUTE FUNCTION oneshot.check_transition();

CREATE FUNCTION oneshot.record_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
    VALUES (NEW.id, NEW.attempt, NULL, NEW.status, NEW.reason);
    RETURN NULL;
  END IF;
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
    VALUES (NEW.id, NEW.attempt, OLD.status, NEW.status, NEW.reason);
    -- Capacity freed or a build queued again: the dispatcher has work. NOTIFY folds equal
    -- payloads within a transaction, so a batch of transitions wakes it once.
    IF OLD.status IN ('launching', 'running') OR NEW.status = 'pending' THEN
      PERFORM pg_notify('oneshot_builds', '');
    END IF;
    -- Log followers stop when the build ends.
    IF NEW.status IN ('succeeded', 'failed', 'canceled') THEN
      PERFORM pg_notify('oneshot_logs', NEW.id::text);
    END IF;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER builds_record_transition AFTER INSERT OR UPDATE OF status ON oneshot.builds
  FOR EACH ROW EXECUTE FUNCTION oneshot.record_transition();

-- One constant-payload notification per enqueue statement, however many rows it inserts.
CREATE FUNCTION oneshot.notify_enqueued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('oneshot_builds', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER builds_notify_enqueued AFTER INSERT ON oneshot.builds
  FOR EACH STATEMENT EXECUTE FUNCTION oneshot.notify_enqueued();

-- Log followers wake on new lines of their build.
CREATE FUNCTION oneshot.notify_logs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('oneshot_logs', b.build_id::text) FROM (SELECT DISTINCT build_id FROM new_lines) b;
  RETURN NULL;
END
$$;

CREATE TRIGGER build_logs_notify AFTER INSERT ON oneshot.build_logs
  REFERENCING NEW TABLE AS new_lines
  FOR EACH STATEMENT EXECUTE FUNCTION oneshot.notify_logs();

-- Validation shared by every producer (HTTP API, CLI, SQL). Errors carry SQLSTATE OS400, the
-- offending field as the error's column, and a message that starts with that field.
CREATE FUNCTION oneshot.invalid(field text, message text, hint text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF hint IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'OS400', MESSAGE = field || ': ' || message, COLUMN = field;
  END IF;
  RAISE EXCEPTION USING ERRCODE = 'OS400', MESSAGE = field || ': ' || message, COLUMN = field, HINT = hint;
END
$$;

CREATE FUNCTION oneshot.check_tags(tags jsonb, max_tags int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  k text;
  v jsonb;
BEGIN
  IF tags IS NULL OR jsonb_typeof(tags) <> 'object' THEN
    PERFORM oneshot.invalid('tags', 'must be an object of string values, like {"org": "default"}');
  END IF;
  IF (SELECT count(*) FROM jsonb_object_keys(tags)) > max_tags THEN
    PERFORM oneshot.invalid('tags', format('at most %s tags are allowed', max_tags));
  END IF;
  FOR k, v IN SELECT * FROM jsonb_each(tags) LOOP
    IF k !~ '^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$' THEN
      PERFORM oneshot.invalid('tags', format('%s is not a valid tag key', to_jsonb(k)),
        'keys are 1 to 63 letters, digits, ''.'', ''_'', ''-'' or ''/'', starting and ending with a letter or digit');
    END IF;
    IF jsonb_typeof(v) <> 'string' THEN
      PERFORM oneshot.invalid('tags.' || k, format('must be a string, got %s', jsonb_typeof(v)));
    END IF;
    IF v #>> '{}' !~ '^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$' THEN
      PERFORM oneshot.invalid('tags.' || k, format('%s is not a valid tag value', v),
        'values are up to 63 letters, digits, ''.'', ''_'' or ''-'', starting and ending with a letter or digit');
    END IF;
  END LOOP;
END
$$;

CREATE FUNCTION oneshot.check_known_keys(field text, obj jsonb, known text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  k text;
BEGIN
  FOR k IN SELECT jsonb_object_keys(obj) LOOP
    IF NOT k = ANY (known) THEN
      PERFORM oneshot.invalid(field || '.' || k, 'unknown field',
        'known fields: ' || array_to_string(known, ', '));
    END IF;
  END LOOP;
END
$$;

CREATE FUNCTION oneshot.check_string_map(field text, obj jsonb, key_pattern text, key_rule text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  k text;
  v jsonb;
BEGIN
  IF jsonb_typeof(obj) <> 'object' THEN
    PERFORM oneshot.invalid(field, format('must be an object of strings, got %s', jsonb_typeof(obj)));
  END IF;
  FOR k, v IN SELECT * FROM jsonb_each(obj) LOOP
    IF k !~ key_pattern THEN
      PERFORM oneshot.invalid(field, format('%s is not a valid name', to_jsonb(k)), key_rule);
    END IF;
    IF jsonb_typeof(v) <> 'string' THEN
      PERFORM oneshot.invalid(field || '.' || k, format('must be a string, got %s', jsonb_typeof(v)));
    END IF;
  END LOOP;
END
$$;

CREATE FUNCTION oneshot.check_input(input jsonb, max_input_bytes int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  provisioner text;
  size int;
  i int;
  el jsonb;
BEGIN
  IF input IS NULL OR jsonb_typeof(input) <> 'object' THEN
    PERFORM oneshot.invalid('input', 'must be an object, like {"provisioner": "script", "command": ["sh", "-c", "echo hi"]}');
  END IF;
  size := octet_length(input::text);
  IF size > max_input_bytes THEN
    PERFORM oneshot.invalid('input', format('is %s bytes; the limit is %s bytes', size, max_input_bytes),
      'the limit is limits.maxInputBytes in the dispatcher''s configuration');
  END IF;
  IF jsonb_typeof(input -> 'provisioner') IS DISTINCT FROM 'string' THEN
    PERFORM oneshot.invalid('input.provisioner', 'is required: "script" or "terraform"');
  END IF;
  provisioner := input ->> 'provisioner';
  IF provisioner = 'script' THEN
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'command', 'env']);
    IF jsonb_typeof(input -> 'command') IS DISTINCT FROM 'array' OR jsonb_array_length(input -> 'command') = 0 THEN
      PERFORM oneshot.invalid('input.command', 'is required: a non-empty array of strings, like ["sh", "-c", "echo hi"]');
    END IF;
    i := 0;
    FOR el IN SELECT * FROM jsonb_array_elements(input -> 'command') LOOP
      IF jsonb_typeof(el) <> 'string' THEN
        PERFORM oneshot.invalid(format('input.command[%s]', i), format('must be a string, got %s', jsonb_typeof(el)));
      END IF;
      IF i = 0 AND el #>> '{}' = '' THEN
        PERFORM oneshot.invalid('input.command[0]', 'must name a program');
      END IF;
      i := i + 1;
    END LOOP;
    IF input ? 'env' THEN
      PERFORM oneshot.check_string_map('input.env', input -> 'env', '^[A-Za-z_][A-Za-z0-9_]*$',
        'environment variable names are letters, digits and ''_'', not starting with a digit');
    END IF;
  ELSIF provisioner = 'terraform' THEN
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'files', 'variables', 'transition']);
    IF jsonb_typeof(input -> 'files') IS DISTINCT FROM 'object' THEN
      PERFORM oneshot.invalid('input.files', 'is required: an object of file name to content, like {"main.tf": "..."}');
    END IF;
    PERFORM oneshot.check_string_map('input.files', input -> 'files',
      '^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$',
      'file names are relative paths of letters, digits, ''.'', ''_'' and ''-''; no ''..'', no leading ''/''');
    IF NOT EXISTS (SELECT 1 FROM jsonb_object_keys(input -> 'files') f WHERE f ~ '\.tf(\.json)?$') THEN
      PERFORM oneshot.invalid('input.files', 'must contain at least one .tf or .tf.json file');
    END IF;
    IF input ? 'variables' AND jsonb_typeof(input -> 'variables') <> 'object' THEN
      PERFORM oneshot.invalid('input.variables', format('must be an object, got %s', jsonb_typeof(input -> 'variables')));
    END IF;
    IF input ? 'transition' AND (input -> 'transition') NOT IN ('"apply"'::jsonb, '"destroy"'::jsonb) THEN
      PERFORM oneshot.invalid('input.transition', format('must be "apply" or "destroy", got %s', input -> 'transition'));
    END IF;
  ELSE
    PERFORM oneshot.invalid('input.provisioner', format('%s is not a provisioner: "script" or "terraform"',
      to_jsonb(provisioner)));
  END IF;
END
$$;

-- The one way a build enters the queue. Call it inside your own transaction to enqueue
-- transactionally; the dispatcher wakes when that transaction commits.
CREATE FUNCTION oneshot.enqueue(tags jsonb, input jsonb, priority int DEFAULT 0, workspace text DEFAULT NULL)
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
  SELECT r.name INTO bound FROM oneshot.routes r WHERE r.tags @> enqueue.tags ORDER BY r.position LIMIT 1;
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
