DROP TABLE questions;
ALTER TABLE agents DROP COLUMN question_timeout_secs;
ALTER TABLE inbound DROP COLUMN context_only;
ALTER TABLE messages DROP COLUMN agent_hops;
