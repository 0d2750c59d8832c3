-- The routes of the builds that used workspace $1, for the API's scope checks: a token may read a
-- workspace's state only when it covers every one of them. Transition: none (read).
SELECT DISTINCT route FROM oneshot.builds WHERE workspace = $1
