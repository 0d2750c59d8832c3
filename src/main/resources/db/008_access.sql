-- Teams on one oneshot: API tokens with a role and the routes they cover, an append-only audit
-- trail of who did what, and the columns that tie a build to who submitted it and keep its
-- sensitive values sealed (encrypted by the dispatcher; the database never holds the key).

CREATE TABLE oneshot.api_tokens (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name          text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
  owner         text NOT NULL DEFAULT '',
  role          text NOT NULL CHECK (role IN ('viewer', 'submitter', 'operator')),
  -- Route names it covers ('*': every route), and route tags: it also covers every route whose
  -- tags include all of these.
  routes        text[] NOT NULL DEFAULT '{}',
  route_tags    jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(route_tags) = 'object'),
  -- SHA-256 of the token; the token itself is shown once, at creation, and never stored.
  token_hash    bytea NOT NULL UNIQUE,
  created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at    timestamptz,
  revoked_at    timestamptz,
  last_used_at  timestamptz,
  CHECK (cardinality(routes) > 0 OR route_tags <> '{}')
);

-- Who did what: appended by the API in the transaction of what it records (or right after it),
-- never changed.
CREATE TABLE oneshot.audit (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at         timestamptz NOT NULL DEFAULT clock_timestamp(),
  actor      text NOT NULL,
  action     text NOT NULL,
  -- 'ok', or why it was refused (out_of_scope, role)
  outcome    text NOT NULL DEFAULT 'ok',
  build_id   bigint,
  route      text,
  workspace  text,
  detail     jsonb
);
CREATE INDEX audit_actor ON oneshot.audit (actor, id);
CREATE INDEX audit_build ON oneshot.audit (build_id) WHERE build_id IS NOT NULL;

CREATE FUNCTION oneshot.audit_is_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'oneshot.audit is append-only: % is not allowed', TG_OP;
END
$$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON oneshot.audit
  FOR EACH STATEMENT EXECUTE FUNCTION oneshot.audit_is_append_only();

-- Who submitted a build through the API (a token's name, or 'admin'; null for oneshot.enqueue()
-- called from SQL), the token, and its sensitive values sealed by the dispatcher.
ALTER TABLE oneshot.builds
  ADD COLUMN submitted_by text,
  ADD COLUMN submitted_token bigint,
  ADD COLUMN sealed text;

-- input.sensitive names the values of input.env (script) or input.variables (terraform) that are
-- masked in the log, never returned by the API, and (submitted through the API) stored sealed.
CREATE OR REPLACE FUNCTION oneshot.check_input(input jsonb, max_input_bytes int) RETURNS void
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
    PERFORM oneshot.invalid('input.provisioner', 'is required: "script", "terraform" or "coder"');
  END IF;
  provisioner := input ->> 'provisioner';
  IF provisioner = 'script' THEN
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'command', 'env', 'sensitive']);
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
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'files', 'variables', 'transition', 'sensitive']);
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
  ELSIF provisioner = 'coder' THEN
    IF input ? 'sensitive' THEN
      PERFORM oneshot.invalid('input.sensitive', 'a coder build has no values of its own to keep secret');
    END IF;
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'source', 'organization', 'tags', 'idleTimeoutMs']);
    IF input ? 'tags' THEN
      PERFORM oneshot.check_string_map('input.tags', input -> 'tags', '^.+$', 'tag names are not empty');
    END IF;
  ELSE
    PERFORM oneshot.invalid('input.provisioner', format('%s is not a provisioner: "script", "terraform" or "coder"',
      to_jsonb(provisioner)));
  END IF;
  IF input ? 'sensitive' THEN
    IF jsonb_typeof(input -> 'sensitive') <> 'array' THEN
      PERFORM oneshot.invalid('input.sensitive', format('must be an array of %s names, got %s',
        CASE provisioner WHEN 'script' THEN 'env' ELSE 'variable' END, jsonb_typeof(input -> 'sensitive')));
    END IF;
    i := 0;
    FOR el IN SELECT * FROM jsonb_array_elements(input -> 'sensitive') LOOP
      IF jsonb_typeof(el) <> 'string' THEN
        PERFORM oneshot.invalid(format('input.sensitive[%s]', i), format('must be a string, got %s', jsonb_typeof(el)));
      END IF;
      IF NOT coalesce((input -> (CASE provisioner WHEN 'script' THEN 'env' ELSE 'variables' END)) ? (el #>> '{}'), false) THEN
        PERFORM oneshot.invalid(format('input.sensitive[%s]', i),
          format('%s is not in input.%s', el, CASE provisioner WHEN 'script' THEN 'env' ELSE 'variables' END),
          'sensitive names the values of input.env (script) or input.variables (terraform) to keep secret');
      END IF;
      i := i + 1;
    END LOOP;
  END IF;
END
$$;
