-- Whose build $1 is: its route and the token that submitted it, for the API's scope checks.
-- Transition: none (read).
SELECT route, submitted_token FROM oneshot.builds WHERE id = $1
