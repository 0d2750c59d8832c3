-- Pulumi builds, and programs from git.
--
-- input.provisioner "pulumi": one operation (up, preview, destroy, refresh) of one stack of one
-- project. The program is input.files, or input.git ({url, ref, path}), which terraform builds may
-- use too. input.config holds the stack's configuration (key: value, "ns:key" or "key" as
-- `pulumi config set` takes them); input.sensitive names the config keys that are secrets (set with
-- --secret, sealed in the database, masked in the log). Project and stack names follow Pulumi's
-- rules (sdk/go/common/tokens: ValidateProjectName, ParseStackName: letters, digits, '_', '.', '-';
-- at most 100 characters).

-- input.git: where a program is cloned from. Only transports that run no command of the URL's
-- choosing (git refuses ext:: by default; it is refused here too, with anything that looks like an
-- option), a ref that is a branch, tag or commit name, and a path inside the checkout.
CREATE FUNCTION oneshot.check_git(git jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF jsonb_typeof(git) <> 'object' THEN
    PERFORM oneshot.invalid('input.git', format('must be an object like {"url": "https://...", "ref": "main", "path": "infra"}, got %s', jsonb_typeof(git)));
  END IF;
  PERFORM oneshot.check_known_keys('input.git', git, ARRAY['url', 'ref', 'path']);
  IF jsonb_typeof(git -> 'url') IS DISTINCT FROM 'string' THEN
    PERFORM oneshot.invalid('input.git.url', 'is required: the repository to clone, like "https://git.example.com/team/infra.git"');
  END IF;
  IF NOT (git ->> 'url' ~ '^(https|http|ssh|git|file)://[^\s]+$'
          OR git ->> 'url' ~ '^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s-][^\s]*$') THEN
    PERFORM oneshot.invalid('input.git.url', format('%s is not a repository URL git may clone', git -> 'url'),
      'use https://, ssh://, git:// or file:// URLs, or user@host:path');
  END IF;
  IF git ? 'ref' AND (jsonb_typeof(git -> 'ref') <> 'string'
      OR NOT (git ->> 'ref' ~ '^[A-Za-z0-9_][A-Za-z0-9._/-]*$') OR git ->> 'ref' ~ '\.\.|//|/$|\.lock$') THEN
    PERFORM oneshot.invalid('input.git.ref', format('%s is not a branch, tag or commit', git -> 'ref'),
      'a ref is a branch or tag name (letters, digits, ''.'', ''_'', ''-'', ''/'') or a commit id');
  END IF;
  IF git ? 'path' AND (jsonb_typeof(git -> 'path') <> 'string'
      OR NOT (git ->> 'path' ~ '^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$')) THEN
    PERFORM oneshot.invalid('input.git.path', format('%s is not a directory of the repository', git -> 'path'),
      'a path is relative, of letters, digits, ''.'', ''_'' and ''-''; no ''..'', no leading ''/''');
  END IF;
END
$$;

-- A build's program: input.files (file name to content, paths kept inside the work directory) or
-- input.git, one of them. True when it is input.files (whose files the caller checks further).
CREATE FUNCTION oneshot.check_program(input jsonb, example text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF input ? 'git' THEN
    IF input ? 'files' THEN
      PERFORM oneshot.invalid('input.git', 'is one program with input.files: give one of them');
    END IF;
    PERFORM oneshot.check_git(input -> 'git');
    RETURN false;
  END IF;
  IF jsonb_typeof(input -> 'files') IS DISTINCT FROM 'object' THEN
    PERFORM oneshot.invalid('input.files', format('is required (or input.git): an object of file name to content, like {"%s": "..."}', example));
  END IF;
  PERFORM oneshot.check_string_map('input.files', input -> 'files',
    '^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$',
    'file names are relative paths of letters, digits, ''.'', ''_'' and ''-''; no ''..'', no leading ''/''');
  RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION oneshot.check_input(input jsonb, max_input_bytes int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  provisioner text;
  holder text;
  size int;
  i int;
  el jsonb;
  k text;
  v jsonb;
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
    PERFORM oneshot.invalid('input.provisioner', 'is required: "script", "terraform", "pulumi" or "coder"');
  END IF;
  provisioner := input ->> 'provisioner';
  IF provisioner = 'script' THEN
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'command', 'env', 'sensitive', 'pod']);
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
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'files', 'git', 'variables', 'transition', 'sensitive', 'pod']);
    IF oneshot.check_program(input, 'main.tf') THEN
      IF NOT EXISTS (SELECT 1 FROM jsonb_object_keys(input -> 'files') f WHERE f ~ '\.tf(\.json)?$') THEN
        PERFORM oneshot.invalid('input.files', 'must contain at least one .tf or .tf.json file');
      END IF;
    END IF;
    IF input ? 'variables' AND jsonb_typeof(input -> 'variables') <> 'object' THEN
      PERFORM oneshot.invalid('input.variables', format('must be an object, got %s', jsonb_typeof(input -> 'variables')));
    END IF;
    IF input ? 'transition' AND (input -> 'transition') NOT IN ('"apply"'::jsonb, '"destroy"'::jsonb) THEN
      PERFORM oneshot.invalid('input.transition', format('must be "apply" or "destroy", got %s', input -> 'transition'));
    END IF;
  ELSIF provisioner = 'pulumi' THEN
    PERFORM oneshot.check_known_keys('input', input,
      ARRAY['provisioner', 'operation', 'project', 'stack', 'files', 'git', 'config', 'sensitive', 'pod']);
    IF input ? 'operation' AND (input -> 'operation') NOT IN ('"up"'::jsonb, '"preview"'::jsonb, '"destroy"'::jsonb, '"refresh"'::jsonb) THEN
      PERFORM oneshot.invalid('input.operation', format('must be "up", "preview", "destroy" or "refresh", got %s', input -> 'operation'));
    END IF;
    IF jsonb_typeof(input -> 'project') IS DISTINCT FROM 'string' OR NOT (input ->> 'project' ~ '^[A-Za-z0-9_.-]{1,100}$') THEN
      PERFORM oneshot.invalid('input.project',
        CASE WHEN input ? 'project' THEN format('%s is not a Pulumi project name', input -> 'project')
             ELSE 'is required: the project name of the program (Pulumi.yaml)' END,
        'a project name is 1 to 100 letters, digits, ''_'', ''.'' and ''-''');
    END IF;
    IF jsonb_typeof(input -> 'stack') IS DISTINCT FROM 'string' OR NOT (input ->> 'stack' ~ '^[A-Za-z0-9_.-]{1,100}$') THEN
      PERFORM oneshot.invalid('input.stack',
        CASE WHEN input ? 'stack' THEN format('%s is not a Pulumi stack name', input -> 'stack')
             ELSE 'is required: the stack to update, like "dev"' END,
        'a stack name is 1 to 100 letters, digits, ''_'', ''.'' and ''-'' (the project is input.project)');
    END IF;
    IF oneshot.check_program(input, 'Pulumi.yaml') THEN
      IF NOT (input -> 'files' ? 'Pulumi.yaml' OR input -> 'files' ? 'Pulumi.yml') THEN
        PERFORM oneshot.invalid('input.files', 'must contain the project file, Pulumi.yaml');
      END IF;
    END IF;
    IF input ? 'config' THEN
      IF jsonb_typeof(input -> 'config') <> 'object' THEN
        PERFORM oneshot.invalid('input.config', format('must be an object of config key to value, like {"aws:region": "eu-west-1"}, got %s', jsonb_typeof(input -> 'config')));
      END IF;
      FOR k, v IN SELECT * FROM jsonb_each(input -> 'config') LOOP
        IF NOT (k ~ '^([A-Za-z0-9_.-]+:)?[A-Za-z0-9_][A-Za-z0-9_.-]*$') THEN
          PERFORM oneshot.invalid(format('input.config.%s', k), 'is not a config key',
            'a key is "name" (of the project) or "namespace:name", of letters, digits, ''_'', ''.'' and ''-''');
        END IF;
        IF jsonb_typeof(v) NOT IN ('string', 'number', 'boolean') THEN
          PERFORM oneshot.invalid(format('input.config.%s', k), format('must be a string, number or boolean, got %s', jsonb_typeof(v)));
        END IF;
      END LOOP;
    END IF;
  ELSIF provisioner = 'coder' THEN
    IF input ? 'sensitive' THEN
      PERFORM oneshot.invalid('input.sensitive', 'a coder build has no values of its own to keep secret');
    END IF;
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'source', 'organization', 'tags', 'idleTimeoutMs', 'pod']);
    IF input ? 'tags' THEN
      PERFORM oneshot.check_string_map('input.tags', input -> 'tags', '^.+$', 'tag names are not empty');
    END IF;
  ELSE
    PERFORM oneshot.invalid('input.provisioner', format('%s is not a provisioner: "script", "terraform", "pulumi" or "coder"',
      to_jsonb(provisioner)));
  END IF;
  IF input ? 'sensitive' THEN
    holder := CASE provisioner WHEN 'script' THEN 'env' WHEN 'pulumi' THEN 'config' ELSE 'variables' END;
    IF jsonb_typeof(input -> 'sensitive') <> 'array' THEN
      PERFORM oneshot.invalid('input.sensitive', format('must be an array of %s names, got %s',
        CASE holder WHEN 'env' THEN 'env' WHEN 'config' THEN 'config key' ELSE 'variable' END, jsonb_typeof(input -> 'sensitive')));
    END IF;
    i := 0;
    FOR el IN SELECT * FROM jsonb_array_elements(input -> 'sensitive') LOOP
      IF jsonb_typeof(el) <> 'string' THEN
        PERFORM oneshot.invalid(format('input.sensitive[%s]', i), format('must be a string, got %s', jsonb_typeof(el)));
      END IF;
      IF NOT coalesce((input -> holder) ? (el #>> '{}'), false) THEN
        PERFORM oneshot.invalid(format('input.sensitive[%s]', i),
          format('%s is not in input.%s', el, holder),
          'sensitive names the values of input.env (script), input.variables (terraform) or input.config (pulumi) to keep secret');
      END IF;
      i := i + 1;
    END LOOP;
  END IF;
END
$$;

-- What a workspace's state is: terraform's state, or a Pulumi stack's checkpoint. A build continues
-- only a state of its own provisioner's kind (state/save).
ALTER TABLE oneshot.workspace_states
  ADD COLUMN format text NOT NULL DEFAULT 'terraform' CHECK (format IN ('terraform', 'pulumi'));
