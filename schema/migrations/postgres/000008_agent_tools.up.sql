-- Agent tools: the hop guard against agent-to-agent loops, and runtimes' questions to humans.
-- Keep in step with ../sqlite/000008_agent_tools.up.sql.

-- A message's agent hops since the last human message (0 for a human's). Recipients of a
-- message past the room's hop limit get its inbound row as context_only: it is delivered
-- with their next turn but neither wakes a room session nor counts as backlog, and a pull
-- receiver never claims it.
ALTER TABLE messages ADD COLUMN agent_hops INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbound ADD COLUMN context_only BOOLEAN NOT NULL DEFAULT FALSE;

-- Per-agent question deadline (seconds; NULL: the setting's, 0: wait indefinitely).
ALTER TABLE agents ADD COLUMN question_timeout_secs INTEGER;

-- A runtime's question to one human of its room: pending until that human's correlated
-- reply (or an operator) answers it, its deadline passes (expired) or the asking runtime
-- goes away (cancelled); answered_at is when it left pending, whichever way. The pending
-- code is unique within its room.
CREATE TABLE questions (
    id                 UUID PRIMARY KEY,
    room_id            UUID NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    agent_id           UUID NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    runtime_session_id UUID NOT NULL,
    recipient          TEXT NOT NULL,
    text               TEXT NOT NULL,
    code               TEXT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('pending', 'answered', 'expired', 'cancelled')),
    answer             TEXT NOT NULL DEFAULT '',
    answered_by        TEXT NOT NULL DEFAULT '',
    message_id         UUID REFERENCES messages (id) ON DELETE SET NULL,
    answer_message_id  UUID REFERENCES messages (id) ON DELETE SET NULL,
    deadline_at        TIMESTAMPTZ,
    created_at         TIMESTAMPTZ NOT NULL,
    answered_at        TIMESTAMPTZ,
    -- When the answer (or the expiry) was handed to the asking runtime: a runtime that asks
    -- the same again after a restart gets an answer that came while nobody waited, once.
    delivered_at       TIMESTAMPTZ,
    CHECK ((state = 'pending') = (answered_at IS NULL))
);
CREATE UNIQUE INDEX questions_pending_code ON questions (room_id, code) WHERE state = 'pending';
CREATE INDEX questions_state ON questions (state, created_at);
CREATE INDEX questions_session ON questions (runtime_session_id, created_at);
