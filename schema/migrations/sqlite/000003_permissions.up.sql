-- Runtime permission requests and the always-rules that answer them without asking.
-- Keep in step with ../postgres/000003_permissions.up.sql.

-- One request a runtime made to run a tool: pending until an operator or a human in the room
-- decides it (allowed | denied), its deadline passes (expired) or the asking turn ends first
-- (cancelled). decided_at is when it left pending; decision is set only by a decider.
CREATE TABLE runtime_permissions (
    id                 TEXT NOT NULL PRIMARY KEY,
    agent_id           TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    room_id            TEXT,
    runtime_session_id TEXT,
    tool_key           TEXT NOT NULL,
    title              TEXT NOT NULL,
    summary            TEXT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('pending', 'allowed', 'denied', 'expired', 'cancelled')),
    decision           TEXT CHECK (decision IN ('allow_once', 'allow_always', 'deny')),
    decided_by         TEXT,
    reason             TEXT NOT NULL DEFAULT '',
    created_at         TIMESTAMP NOT NULL,
    decided_at         TIMESTAMP,
    deadline_at        TIMESTAMP,
    CHECK ((state = 'pending') = (decided_at IS NULL)),
    CHECK (decision IS NULL OR state IN ('allowed', 'denied'))
);
CREATE INDEX runtime_permissions_state ON runtime_permissions (state, created_at);
CREATE INDEX runtime_permissions_agent ON runtime_permissions (agent_id, created_at);
CREATE INDEX runtime_permissions_pending_room ON runtime_permissions (room_id) WHERE state = 'pending';

-- allow_always: every later request of the agent with this tool key is allowed at once.
CREATE TABLE permission_rules (
    agent_id   TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    tool_key   TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (agent_id, tool_key)
);
