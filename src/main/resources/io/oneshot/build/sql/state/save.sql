-- Stores the running attempt's workspace state (terraform's state, or a Pulumi checkpoint: $9 says
-- which, and it must be the kind of the build's provisioner and of the version it started from) as
-- the next version of its route's workspace, or
-- updates the version this attempt already wrote (terraform writes state as it goes). Within an
-- attempt the state only moves forward: a lower serial, or a lineage other than the one the attempt
-- stored first or started from, is refused (terraform keeps the lineage of the state it is given, and
-- only starts one where there was none, which is noted). $2 is the state as stored (sealed when
-- encryption keys are configured, bound to route, workspace and version $8, which
-- state/next-version gave), $7 its size before sealing; it is stored as version $8 or not at all (the
-- attempt's version moved meanwhile: nothing is stored, and the caller seals it again).
-- Transition: none (workspace state).
-- Guards (the fence on state uploads): token_hash = $1, status = 'running', runner_id = $6 (only the
-- bound runner of the running attempt writes; an old attempt's token and another runner's id match
-- nothing), workspace IS NOT NULL; then the serial and lineage checks of "verdict".
WITH b AS (
  SELECT id, attempt, route, workspace, state_read_version,
         CASE input ->> 'provisioner' WHEN 'pulumi' THEN 'pulumi' ELSE 'terraform' END AS format
  FROM oneshot.builds
  WHERE token_hash = $1 AND status = 'running' AND runner_id = $6 AND workspace IS NOT NULL
  FOR UPDATE
), mine AS (
  SELECT s.serial, s.lineage FROM oneshot.workspace_states s
  JOIN b ON s.build_id = b.id AND s.attempt = b.attempt
), base AS (
  SELECT s.version, s.serial, s.lineage, s.format FROM oneshot.workspace_states s
  JOIN b ON s.route = b.route AND s.workspace = b.workspace AND s.version = b.state_read_version
), prev AS (
  SELECT s.version, s.lineage FROM oneshot.workspace_states s
  JOIN b ON s.route = b.route AND s.workspace = b.workspace
    AND NOT (s.build_id = b.id AND s.attempt = b.attempt)
  ORDER BY s.version DESC LIMIT 1
), verdict AS (
  SELECT
    CASE
      WHEN $9::text <> b.format
        THEN format('a %s build''s state must be %s, not %s', b.format,
                    CASE b.format WHEN 'pulumi' THEN 'its stack''s Pulumi checkpoint' ELSE 'a terraform state' END,
                    CASE $9::text WHEN 'pulumi' THEN 'a Pulumi checkpoint' ELSE 'a terraform state' END)
      WHEN (SELECT format FROM base) <> $9::text
        THEN format('version %s of this workspace is %s, which a %s build cannot continue',
                    (SELECT version FROM base),
                    CASE (SELECT format FROM base) WHEN 'pulumi' THEN 'a Pulumi checkpoint' ELSE 'a terraform state' END,
                    b.format)
      WHEN $3::bigint < (SELECT serial FROM mine)
        THEN format('serial %s is lower than serial %s, which this attempt stored already',
                    $3, (SELECT serial FROM mine))
      WHEN (SELECT lineage FROM mine) IS NOT NULL AND $4::text IS DISTINCT FROM (SELECT lineage FROM mine)
        THEN format('lineage %s differs from lineage %s, which this attempt stored already',
                    coalesce($4, '(none)'), (SELECT lineage FROM mine))
      WHEN NOT EXISTS (SELECT 1 FROM mine) AND $3::bigint < (SELECT serial FROM base)
        THEN format('serial %s is lower than serial %s of version %s, which this build started from',
                    $3, (SELECT serial FROM base), (SELECT version FROM base))
      WHEN (SELECT lineage FROM base) IS NOT NULL AND $4::text IS DISTINCT FROM (SELECT lineage FROM base)
        THEN format('lineage %s differs from lineage %s of version %s, which this build started'
                    ' from (terraform keeps the lineage of the state it is given)',
                    coalesce($4, '(none)'), (SELECT lineage FROM base), (SELECT version FROM base))
    END AS refused,
    CASE
      WHEN NOT EXISTS (SELECT 1 FROM mine) AND (SELECT lineage FROM base) IS NULL
           AND (SELECT lineage FROM prev) IS NOT NULL AND $4::text IS DISTINCT FROM (SELECT lineage FROM prev)
        THEN format('terraform started a new lineage %s; the previous version %s had lineage %s',
                    coalesce($4, '(none)'), (SELECT version FROM prev), (SELECT lineage FROM prev))
    END AS note
  FROM b
), v AS (
  INSERT INTO oneshot.workspace_states AS s
    (route, workspace, version, build_id, attempt, state, bytes, serial, lineage, final, format)
  SELECT b.route, b.workspace, $8::int, b.id, b.attempt, $2, $7, $3, $4, $5, $9
  FROM b, verdict
  WHERE verdict.refused IS NULL
    AND (EXISTS (SELECT 1 FROM mine)
         OR $8::int = coalesce((SELECT max(w.version) FROM oneshot.workspace_states w
                                WHERE w.route = b.route AND w.workspace = b.workspace), 0) + 1)
  ON CONFLICT (build_id, attempt) DO UPDATE
    SET state = excluded.state, bytes = excluded.bytes, serial = excluded.serial,
        lineage = excluded.lineage, final = excluded.final, format = excluded.format,
        updated_at = clock_timestamp()
    WHERE s.version = $8::int
  RETURNING s.build_id, s.version
), u AS (
  UPDATE oneshot.builds x SET state_written_version = v.version
  FROM v WHERE x.id = v.build_id
  RETURNING x.id
)
SELECT b.id, (SELECT version FROM v) AS version, verdict.refused, verdict.note,
       (SELECT count(*) FROM u) AS updated
FROM b, verdict
