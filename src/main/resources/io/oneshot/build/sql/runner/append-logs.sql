-- Appends a batch of provisionerd's log lines under the build's row lock (of the strength NO KEY
-- UPDATE: not one a launch record waits for), so that sequence numbers
-- follow commit order and a follower reading "after seq N" never misses a line. The runner numbers
-- its lines ($3: the batch's first); lines delivered before (a batch sent again after a lost reply)
-- are skipped. Lines past the build's log limit ($9 bytes) are dropped and counted. Milestone lines
-- also go to the timeline. Transition: none.
-- Guards: token_hash = $1, status = 'running', runner_id = $11 (the bound runner only).
WITH prev AS (
  SELECT id, runner_log_seq FROM oneshot.builds
  WHERE token_hash = $1 AND status = 'running' AND runner_id = $11
  FOR NO KEY UPDATE
), fresh AS (
  SELECT greatest(0, least($2::bigint, $3::bigint + $2::bigint - 1 - prev.runner_log_seq))::bigint AS n,
         prev.runner_log_seq AS seen
  FROM prev
), lines AS (
  SELECT t.*, sum(octet_length(t.text)) OVER (ORDER BY t.ord) AS cum
  FROM unnest($4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[],
              $10::boolean[])
       WITH ORDINALITY AS t(ts, stream, level, stage, text, milestone, ord), fresh
  WHERE $3::bigint + t.ord - 1 > fresh.seen
), b AS (
  UPDATE oneshot.builds x
  SET log_seq = x.log_seq + fresh.n,
      log_bytes = x.log_bytes + coalesce((SELECT max(cum) FROM lines), 0),
      runner_log_seq = greatest(x.runner_log_seq, $3::bigint + $2::bigint - 1),
      heartbeat_at = clock_timestamp()
  FROM prev, fresh
  WHERE x.id = prev.id
  RETURNING x.id, x.attempt, x.log_seq - fresh.n AS base,
            x.log_bytes - coalesce((SELECT max(cum) FROM lines), 0) AS bytes_before,
            x.cancel_requested_at IS NOT NULL AS cancel_requested
), ins AS (
  INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
  SELECT b.id, b.base + row_number() OVER (ORDER BY l.ord), l.ts, b.attempt, l.stream,
         l.level, l.stage, l.text
  FROM b, lines l
  WHERE b.bytes_before + l.cum <= $9
  RETURNING 1
), steps AS (
  INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason, at)
  SELECT b.id, b.attempt, 'running', 'running', l.text, l.ts
  FROM b, lines l
  WHERE l.milestone
)
SELECT b.id, b.attempt, b.cancel_requested, b.bytes_before,
       (SELECT n FROM fresh)::int AS fresh, (SELECT count(*) FROM ins)::int AS accepted
FROM b
