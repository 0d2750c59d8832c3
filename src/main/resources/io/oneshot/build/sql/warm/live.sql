-- Warm capacity: each route's builds that hold a slot now (launching or running), the figure the
-- routes' balloons are counted from. Transition: none (read).
SELECT route, count(*)::int AS live
FROM oneshot.builds
WHERE status IN ('launching', 'running')
GROUP BY route
