# Sourced by scripts/e2e and scripts/failover: the audit of a finished run, from the database.
# The caller defines `sql` (runs one statement, prints its single value) before calling.
#
#   audit_builds N FAILING ROUTE:LIMIT... GLOBAL_LIMIT
#
# checks that all N builds ended, that every failure has a reason, that the FAILING builds whose
# scripts exit 3 failed, that no build ever had two live attempts and that no route's limit (nor
# the global one) was ever exceeded, replayed from the event table in commit order. Sets
# audit_failed=1 on any failure; prints a line per check.
#
#   audit_track
#
# numbers events in commit order from now on (src/test/resources/audit/commit-order.sql): call it
# before the run, once the schema exists.

audit_failed=0
audit_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

audit_track() {
  sql "$(cat "$audit_root/src/test/resources/audit/commit-order.sql")" >/dev/null
}

check() { # name, SQL returning a single value, expected value
  local got
  got=$(sql "$2")
  if [ "$got" = "$3" ]; then echo "ok    $1 ($got)"; else echo "FAIL  $1: got $got, expected $3"; audit_failed=1; fi
}

audit_builds() {
  local n=$1 failing=$2
  shift 2
  local global=${!#}
  check "every build ended" "SELECT count(*) FROM oneshot.builds WHERE finished_at IS NULL" 0
  check "builds" "SELECT count(*) FROM oneshot.builds" "$n"
  check "failures without a reason" "SELECT count(*) FROM oneshot.builds WHERE status IN ('failed', 'canceled') AND (error IS NULL OR error = '')" 0
  check "scripts that should fail and did" "SELECT count(*) FROM oneshot.builds WHERE status = 'failed' AND exit_code = 3" "$failing"
  local live_sweep="
    WITH ev AS (
      SELECT e.build_id, e.id, c.seq, b.route,
             (CASE WHEN e.to_status IN ('launching', 'running') THEN 1 ELSE 0 END)
           - (CASE WHEN e.from_status IN ('launching', 'running') THEN 1 ELSE 0 END) AS d
      FROM oneshot.build_events e JOIN oneshot.builds b ON b.id = e.build_id
      LEFT JOIN oneshot_audit.commit_order c ON c.event_id = e.id
      WHERE e.from_status IS DISTINCT FROM e.to_status)"
  check "transitions with no commit number (audit_track before the run)" "$live_sweep SELECT count(*) FROM ev WHERE d <> 0 AND seq IS NULL" 0
  check "most live attempts of one build" "$live_sweep SELECT max(l) FROM (SELECT sum(d) OVER (PARTITION BY build_id ORDER BY seq) l FROM ev) x" 1
  local r name limit
  for r in "${@:1:$#-1}"; do
    name=${r%%:*}; limit=${r##*:}
    check "route $name never above $limit" "$live_sweep SELECT max(l) <= $limit FROM (SELECT sum(d) OVER (ORDER BY seq) l FROM ev WHERE route = '$name') x" t
  done
  check "global never above $global" "$live_sweep SELECT max(l) <= $global FROM (SELECT sum(d) OVER (ORDER BY seq) l FROM ev) x" t
}

audit_summary() {
  echo "requeued attempts:  $(sql "SELECT count(*) FROM oneshot.build_events WHERE from_status IN ('launching','running') AND to_status = 'pending'")"
  echo "outcomes:           $(sql "SELECT string_agg(status || ' ' || c, ', ' ORDER BY status) FROM (SELECT status, count(*) c FROM oneshot.builds GROUP BY 1) x")"
  echo "failure reasons:    $(sql "SELECT string_agg(DISTINCT regexp_replace(error, '[0-9]+', 'N', 'g'), '; ') FROM oneshot.builds WHERE status = 'failed'")"
}
