-- After runners' completions committed (runner/complete.sql leaves its notifications to this): the
-- dispatcher and the sources hear that capacity was freed, and each build's log followers that it
-- ended. synchronous_commit is off for this transaction alone: it writes nothing worth waiting for
-- (notifications are not kept), so it holds NOTIFY's lock without waiting on a WAL flush.
SELECT set_config('synchronous_commit', 'off', true),
       pg_notify('oneshot_builds', ''),
       (SELECT count(pg_notify('oneshot_logs', id::text)) FROM unnest($1::bigint[]) id)
