ALTER TABLE messages DROP COLUMN parts;
ALTER TABLE messages DROP COLUMN part;
ALTER TABLE messages DROP COLUMN continues;
