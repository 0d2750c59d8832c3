-- Queue sources: builds enqueued by the dispatcher for jobs waiting in a database oneshot does not
-- own (Coder's provisioner_jobs, or an operator's own table). A source keeps, per tag set, as many
-- builds in flight as there are waiting jobs: pending, launching, or running but not yet holding a
-- job (source_taken_at null).
ALTER TABLE oneshot.builds
  ADD COLUMN source text,
  ADD COLUMN source_key jsonb,
  ADD COLUMN source_taken_at timestamptz;
CREATE INDEX builds_source_in_flight ON oneshot.builds (source, source_key)
  WHERE source IS NOT NULL AND status IN ('pending', 'launching', 'running') AND source_taken_at IS NULL;

-- The coder provisioner: provisionerd runs `coder provisioner start` for one Coder job. Its input
-- names the source's tag set; the daemon's key and Coder's URL come from the pod.
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
  ELSIF provisioner = 'coder' THEN
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'source', 'organization', 'tags', 'idleTimeoutMs']);
    IF input ? 'tags' THEN
      PERFORM oneshot.check_string_map('input.tags', input -> 'tags', '^.+$', 'tag names are not empty');
    END IF;
  ELSE
    PERFORM oneshot.invalid('input.provisioner', format('%s is not a provisioner: "script", "terraform" or "coder"',
      to_jsonb(provisioner)));
  END IF;
END
$$;
