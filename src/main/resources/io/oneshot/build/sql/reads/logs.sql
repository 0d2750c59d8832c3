-- A page of a build's log after seq $2. The status is read in the same statement as the lines, so a
-- finished status means no line can follow the page. Transition: none (read).
SELECT b.status, l.seq, l.ts, l.attempt, l.stream, l.level, l.stage, l.text
FROM oneshot.builds b
LEFT JOIN LATERAL (
  SELECT * FROM oneshot.build_logs l
  WHERE l.build_id = b.id AND l.seq > $2 ORDER BY l.seq LIMIT $3
) l ON true
WHERE b.id = $1
