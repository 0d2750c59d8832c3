-- A build may ask for its own pod settings (input.pod: resources, image, node selector entries,
-- tolerations, labels, annotations, service account), each only as its route allows
-- (routes[].pod, mirrored into oneshot.routes.pod_rules by the dispatcher at start): a size over the
-- route's maximum is clamped to it with a note in the build's log and timeline, or refused, as the
-- route says (overLimit); anything else outside the route's rules is refused with the field named.
-- Checked here, so that the HTTP API, the CLI and SQL producers are held to the same rules.
ALTER TABLE oneshot.routes ADD COLUMN pod_rules jsonb;

-- What a build met of its pod's limits, as its provisionerd read its cgroups and reported with its
-- outcome: processes the OOM killer killed and the memory limit, time throttled for the CPU limit
-- (what `builds show` and the console say, and a rerun asks more of).
ALTER TABLE oneshot.builds ADD COLUMN usage jsonb;

-- A Kubernetes quantity ("500m", "2", "1.5", "512Mi", "4Gi", "1e3") as a number, or null when the
-- text is not one (k8s.io/apimachinery/pkg/api/resource/quantity.go's grammar: a decimal number and
-- an optional binary or decimal suffix, or an exponent).
CREATE FUNCTION oneshot.quantity(q text) RETURNS numeric LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  m text[];
BEGIN
  m := regexp_match(q, '^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]{1,3})?$');
  IF m IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN m[1]::numeric * CASE coalesce(m[3], '')
    WHEN '' THEN 1::numeric
    WHEN 'Ki' THEN 1024::numeric WHEN 'Mi' THEN 1048576::numeric WHEN 'Gi' THEN 1073741824::numeric
    WHEN 'Ti' THEN 1099511627776::numeric WHEN 'Pi' THEN 1125899906842624::numeric
    WHEN 'Ei' THEN 1152921504606846976::numeric
    WHEN 'n' THEN 0.000000001 WHEN 'u' THEN 0.000001 WHEN 'm' THEN 0.001
    WHEN 'k' THEN 1000::numeric WHEN 'M' THEN 1000000::numeric WHEN 'G' THEN 1000000000::numeric
    WHEN 'T' THEN 1000000000000::numeric WHEN 'P' THEN 1000000000000000::numeric
    WHEN 'E' THEN 1000000000000000000::numeric
    ELSE power(10::numeric, substr(m[3], 2)::int) END;
END
$$;

-- A label's or annotation's key as Kubernetes takes it: an optional DNS subdomain and '/', then a
-- name of 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit.
CREATE FUNCTION oneshot.is_label_key(k text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT k ~ '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'
     AND length(split_part(k, '/', 1)) <= CASE WHEN k LIKE '%/%' THEN 253 ELSE 63 END
     AND length(CASE WHEN k LIKE '%/%' THEN split_part(k, '/', 2) ELSE k END) <= 63
$$;

-- A key whose prefix is oneshot's own (oneshot.io: a build's identity, which no build may claim)
-- or Kubernetes' (kubernetes.io, k8s.io: reserved by Kubernetes), or null when it is neither.
CREATE FUNCTION oneshot.reserved_key(k text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN split_part(k, '/', 1) ~ '(^|\.)oneshot\.io$' AND k LIKE '%/%' THEN 'oneshot''s own (a build''s identity)'
    WHEN split_part(k, '/', 1) ~ '(^|\.)(kubernetes\.io|k8s\.io)$' AND k LIKE '%/%' THEN 'reserved by Kubernetes'
  END
$$;

-- Whether text t matches one of the rules' patterns ([{glob, regex}]), and those patterns as the
-- operator wrote them, for messages.
CREATE FUNCTION oneshot.matches_any(t text, patterns jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(patterns, '[]')) p WHERE t ~ (p ->> 'regex'))
$$;

CREATE FUNCTION oneshot.globs(patterns jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(string_agg(p ->> 'glob', ', '), 'none') FROM jsonb_array_elements(coalesce(patterns, '[]')) p
$$;

-- A map of keys to values (nodeSelector, labels, annotations) held to rules of the shape
-- [{key: {glob, regex}, values: [{glob, regex}]}]: each key must match a rule's key and its value
-- one of that rule's values.
CREATE FUNCTION oneshot.check_pod_map(field text, obj jsonb, route text, rules jsonb, what text,
                                      label_values boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  k text;
  v jsonb;
  rule jsonb;
  reserved text;
BEGIN
  IF jsonb_typeof(obj) <> 'object' THEN
    PERFORM oneshot.invalid(field, format('must be an object of strings, got %s', jsonb_typeof(obj)));
  END IF;
  FOR k, v IN SELECT * FROM jsonb_each(obj) LOOP
    IF NOT oneshot.is_label_key(k) THEN
      PERFORM oneshot.invalid(field, format('%s is not a valid key', to_jsonb(k)),
        'a key is an optional DNS subdomain and ''/'', then 1 to 63 letters, digits, ''-'', ''_'' or ''.'', starting and ending with a letter or digit');
    END IF;
    reserved := oneshot.reserved_key(k);
    IF reserved IS NOT NULL THEN
      PERFORM oneshot.invalid(field || '.' || k, format('the key %s is %s', k, reserved));
    END IF;
    IF jsonb_typeof(v) <> 'string' THEN
      PERFORM oneshot.invalid(field || '.' || k, format('must be a string, got %s', jsonb_typeof(v)));
    END IF;
    IF label_values AND v #>> '{}' !~ '^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$' THEN
      PERFORM oneshot.invalid(field || '.' || k, format('%s is not a valid value', v),
        'a value is up to 63 letters, digits, ''-'', ''_'' or ''.'', starting and ending with a letter or digit');
    END IF;
    SELECT r INTO rule FROM jsonb_array_elements(coalesce(rules, '[]')) r WHERE k ~ (r -> 'key' ->> 'regex') LIMIT 1;
    IF rule IS NULL THEN
      PERFORM oneshot.invalid(field || '.' || k, format('route %s lets builds set no %s %s', route, what, k),
        format('route %s allows %s keys: %s', route, what,
          coalesce((SELECT string_agg(r -> 'key' ->> 'glob', ', ') FROM jsonb_array_elements(coalesce(rules, '[]')) r), 'none')));
    END IF;
    IF NOT oneshot.matches_any(v #>> '{}', rule -> 'values') THEN
      PERFORM oneshot.invalid(field || '.' || k, format('%s is not a value route %s allows for %s', v, route, k),
        format('allowed: %s', oneshot.globs(rule -> 'values')));
    END IF;
  END LOOP;
END
$$;

-- A build's input.pod held to its route's rules: returns {pod, notes}, the settings as the build
-- gets them (sizes over the route's maxima clamped, when the route says clamp) and what was
-- clamped; raises (oneshot.invalid) on anything the route does not allow.
CREATE FUNCTION oneshot.check_pod(pod jsonb, route text, rules jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  notes jsonb := '[]';
  kind text;
  name text;
  q jsonb;
  amount numeric;
  most text;
  lim text;
  el jsonb;
  i int;
  k text;
BEGIN
  IF jsonb_typeof(pod) <> 'object' THEN
    PERFORM oneshot.invalid('input.pod', format('must be an object, got %s', jsonb_typeof(pod)));
  END IF;
  IF rules IS NULL THEN
    PERFORM oneshot.invalid('input.pod', format('route %s takes no pod settings from its builds', route),
      'a route lets its builds ask for pod settings with pod: in its configuration (docs/pod-settings.md)');
  END IF;
  PERFORM oneshot.check_known_keys('input.pod', pod,
    ARRAY['resources', 'image', 'nodeSelector', 'tolerations', 'labels', 'annotations', 'serviceAccount']);

  IF pod ? 'resources' THEN
    IF jsonb_typeof(pod -> 'resources') <> 'object' THEN
      PERFORM oneshot.invalid('input.pod.resources', 'must be an object like {"requests": {"memory": "1Gi"}, "limits": {"memory": "2Gi"}}');
    END IF;
    PERFORM oneshot.check_known_keys('input.pod.resources', pod -> 'resources', ARRAY['requests', 'limits']);
    FOREACH kind IN ARRAY ARRAY['requests', 'limits'] LOOP
      CONTINUE WHEN NOT (pod -> 'resources') ? kind;
      IF jsonb_typeof(pod -> 'resources' -> kind) <> 'object' THEN
        PERFORM oneshot.invalid('input.pod.resources.' || kind, format('must be an object of quantities, got %s',
          jsonb_typeof(pod -> 'resources' -> kind)));
      END IF;
      FOR name, q IN SELECT * FROM jsonb_each(pod -> 'resources' -> kind) LOOP
        amount := CASE jsonb_typeof(q) WHEN 'string' THEN oneshot.quantity(q #>> '{}')
                                      WHEN 'number' THEN oneshot.quantity(q::text) END;
        IF amount IS NULL THEN
          PERFORM oneshot.invalid(format('input.pod.resources.%s.%s', kind, name),
            format('%s is not a quantity', q), 'a quantity is like 500m, 2, 512Mi or 4Gi');
        END IF;
        most := rules -> (CASE kind WHEN 'requests' THEN 'maxRequests' ELSE 'maxLimits' END) ->> name;
        IF most IS NULL THEN
          PERFORM oneshot.invalid(format('input.pod.resources.%s.%s', kind, name),
            format('route %s lets builds ask for no %s of %s', route, kind, name),
            format('route %s lets builds ask for %s of: %s', route, kind,
              coalesce((SELECT string_agg(x, ', ' ORDER BY x) FROM jsonb_object_keys(
                rules -> (CASE kind WHEN 'requests' THEN 'maxRequests' ELSE 'maxLimits' END)) x), 'nothing')));
        END IF;
        IF amount > oneshot.quantity(most) THEN
          IF rules ->> 'overLimit' = 'refuse' THEN
            PERFORM oneshot.invalid(format('input.pod.resources.%s.%s', kind, name),
              format('%s is over route %s''s maximum of %s', q #>> '{}', route, most));
          END IF;
          notes := notes || to_jsonb(format('%s.%s %s is over route %s''s maximum: clamped to %s',
            kind, name, q #>> '{}', route, most));
          pod := jsonb_set(pod, ARRAY['resources', kind, name], to_jsonb(most));
        ELSE
          pod := jsonb_set(pod, ARRAY['resources', kind, name], to_jsonb(q #>> '{}'));
        END IF;
      END LOOP;
    END LOOP;
    -- A request above the limit its pod would have (its own, else the template's) is one the API
    -- server would refuse when the Job's pod is made: refused now, with nothing written.
    FOR name, q IN SELECT * FROM jsonb_each(coalesce(pod -> 'resources' -> 'requests', '{}')) LOOP
      lim := coalesce(pod -> 'resources' -> 'limits' ->> name, rules -> 'template' -> 'limits' ->> name);
      IF lim IS NOT NULL AND oneshot.quantity(q #>> '{}') > oneshot.quantity(lim) THEN
        PERFORM oneshot.invalid('input.pod.resources.requests.' || name,
          format('%s is above the %s limit its pod would have (%s%s)', q #>> '{}', name, lim,
            CASE WHEN pod -> 'resources' -> 'limits' ? name THEN '' ELSE ', its template''s' END),
          format('ask for limits.%s of at least as much', name));
      END IF;
    END LOOP;
  END IF;

  IF pod ? 'image' THEN
    IF jsonb_typeof(pod -> 'image') <> 'string' OR pod ->> 'image' !~ '^[^\s]+$' OR length(pod ->> 'image') > 512 THEN
      PERFORM oneshot.invalid('input.pod.image', 'must be an image reference like ghcr.io/acme/tools:1.4');
    END IF;
    IF NOT oneshot.matches_any(pod ->> 'image', rules -> 'images') THEN
      PERFORM oneshot.invalid('input.pod.image', format('%s is not an image route %s allows', pod ->> 'image', route),
        format('allowed images: %s', oneshot.globs(rules -> 'images')));
    END IF;
  END IF;

  IF pod ? 'nodeSelector' THEN
    PERFORM oneshot.check_pod_map('input.pod.nodeSelector', pod -> 'nodeSelector', route,
      rules -> 'nodeSelector', 'node selector entry', true);
  END IF;
  IF pod ? 'labels' THEN
    PERFORM oneshot.check_pod_map('input.pod.labels', pod -> 'labels', route, rules -> 'labels', 'label', true);
  END IF;
  IF pod ? 'annotations' THEN
    PERFORM oneshot.check_pod_map('input.pod.annotations', pod -> 'annotations', route,
      rules -> 'annotations', 'annotation', false);
  END IF;

  IF pod ? 'tolerations' THEN
    IF jsonb_typeof(pod -> 'tolerations') <> 'array' THEN
      PERFORM oneshot.invalid('input.pod.tolerations', format('must be an array of tolerations, got %s',
        jsonb_typeof(pod -> 'tolerations')));
    END IF;
    i := 0;
    FOR el IN SELECT * FROM jsonb_array_elements(pod -> 'tolerations') LOOP
      k := format('input.pod.tolerations[%s]', i);
      IF jsonb_typeof(el) <> 'object' THEN
        PERFORM oneshot.invalid(k, 'must be an object like {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}');
      END IF;
      PERFORM oneshot.check_known_keys(k, el, ARRAY['key', 'operator', 'value', 'effect', 'tolerationSeconds']);
      IF jsonb_typeof(el -> 'key') IS DISTINCT FROM 'string' OR el ->> 'key' = '' THEN
        PERFORM oneshot.invalid(k || '.key', 'is required: the taint''s key (a toleration without one tolerates every taint)');
      END IF;
      IF NOT oneshot.matches_any(el ->> 'key', rules -> 'tolerations') THEN
        PERFORM oneshot.invalid(k || '.key', format('route %s lets builds tolerate no taint %s', route, el ->> 'key'),
          format('taints its builds may tolerate: %s', oneshot.globs(rules -> 'tolerations')));
      END IF;
      IF el ? 'operator' AND (el -> 'operator') NOT IN ('"Exists"'::jsonb, '"Equal"'::jsonb) THEN
        PERFORM oneshot.invalid(k || '.operator', format('must be "Exists" or "Equal", got %s', el -> 'operator'));
      END IF;
      IF el ? 'value' AND (jsonb_typeof(el -> 'value') <> 'string'
          OR el ->> 'value' !~ '^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$') THEN
        PERFORM oneshot.invalid(k || '.value', 'must be a taint''s value: up to 63 letters, digits, ''-'', ''_'' or ''.''');
      END IF;
      IF el ->> 'operator' = 'Exists' AND coalesce(el ->> 'value', '') <> '' THEN
        PERFORM oneshot.invalid(k || '.value', 'must be empty with the operator Exists');
      END IF;
      IF el ? 'effect' AND (el -> 'effect') NOT IN ('""'::jsonb, '"NoSchedule"'::jsonb, '"PreferNoSchedule"'::jsonb, '"NoExecute"'::jsonb) THEN
        PERFORM oneshot.invalid(k || '.effect', format('must be "NoSchedule", "PreferNoSchedule" or "NoExecute", got %s', el -> 'effect'));
      END IF;
      IF el ? 'tolerationSeconds' AND (jsonb_typeof(el -> 'tolerationSeconds') <> 'number'
          OR (el ->> 'tolerationSeconds')::numeric <> trunc((el ->> 'tolerationSeconds')::numeric)
          OR (el ->> 'tolerationSeconds')::numeric NOT BETWEEN 0 AND 2147483647
          OR el ->> 'effect' IS DISTINCT FROM 'NoExecute') THEN
        PERFORM oneshot.invalid(k || '.tolerationSeconds', 'must be a whole number of seconds, with the effect NoExecute');
      END IF;
      i := i + 1;
    END LOOP;
  END IF;

  IF pod ? 'serviceAccount' THEN
    IF jsonb_typeof(pod -> 'serviceAccount') <> 'string' THEN
      PERFORM oneshot.invalid('input.pod.serviceAccount', format('must be a string, got %s', jsonb_typeof(pod -> 'serviceAccount')));
    END IF;
    IF NOT coalesce(rules -> 'serviceAccounts', '[]') ? (pod ->> 'serviceAccount') THEN
      PERFORM oneshot.invalid('input.pod.serviceAccount',
        format('%s is not a service account route %s''s builds may run as', to_jsonb(pod ->> 'serviceAccount'), route),
        format('allowed: %s', coalesce((SELECT string_agg(a, ', ') FROM jsonb_array_elements_text(rules -> 'serviceAccounts') a), 'none')));
    END IF;
  END IF;
  RETURN jsonb_build_object('pod', pod, 'notes', notes);
END
$$;

-- input.pod is part of every provisioner's input.
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
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'files', 'variables', 'transition', 'sensitive', 'pod']);
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
    PERFORM oneshot.check_known_keys('input', input, ARRAY['provisioner', 'source', 'organization', 'tags', 'idleTimeoutMs', 'pod']);
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

CREATE OR REPLACE FUNCTION oneshot.enqueue(tags jsonb, input jsonb, priority int DEFAULT 0, workspace text DEFAULT NULL)
RETURNS oneshot.builds LANGUAGE plpgsql AS $$
DECLARE
  lim oneshot.limits;
  bound text;
  b oneshot.builds;
  checked jsonb;
  notes text[];
  item jsonb := enqueue.input;
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
  -- The build's own pod settings, within what its route allows (clamped or refused, as it says).
  IF item ? 'pod' THEN
    checked := oneshot.check_pod(item -> 'pod', bound, (SELECT r.pod_rules FROM oneshot.routes r WHERE r.name = bound));
    item := jsonb_set(item, '{pod}', checked -> 'pod');
    SELECT array_agg(n) INTO notes FROM jsonb_array_elements_text(checked -> 'notes') n;
  END IF;
  INSERT INTO oneshot.builds (route, tags, input, priority, workspace, reason, log_seq)
  VALUES (bound, enqueue.tags, item, enqueue.priority, enqueue.workspace,
          CASE WHEN notes IS NULL THEN 'enqueued' ELSE 'enqueued; ' || array_to_string(notes, '; ') END,
          coalesce(cardinality(notes), 0))
  RETURNING * INTO b;
  -- What was clamped, in the build's log as well as its timeline.
  IF notes IS NOT NULL THEN
    INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
    SELECT b.id, i, clock_timestamp(), 0, 'system', 'warn', NULL, notes[i]
    FROM generate_subscripts(notes, 1) i;
  END IF;
  RETURN b;
END
$$;
