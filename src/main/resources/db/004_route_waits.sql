-- `oneshot routes` shows each route's oldest queued build and its waits over the last hour.
CREATE INDEX builds_claimed ON oneshot.builds (route, claimed_at) WHERE claimed_at IS NOT NULL;
CREATE INDEX builds_pending_age ON oneshot.builds (route, id) WHERE status = 'pending';
