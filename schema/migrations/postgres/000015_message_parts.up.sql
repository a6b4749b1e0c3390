-- A long agent reply is posted as ordered parts (issue 43): each part after the first
-- continues the one before it; part counts from 1 of parts (0 and 0 for a message that is
-- whole).
ALTER TABLE messages ADD COLUMN continues UUID REFERENCES messages (id);
ALTER TABLE messages ADD COLUMN part INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN parts INTEGER NOT NULL DEFAULT 0;
