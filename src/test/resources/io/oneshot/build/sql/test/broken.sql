-- A statement that names a column the schema does not have: it must fail the start.
UPDATE oneshot.builds SET no_such_column = 1 WHERE id = $1
