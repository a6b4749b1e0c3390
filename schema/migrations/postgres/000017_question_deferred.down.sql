ALTER TABLE questions DROP COLUMN deferred_at;
