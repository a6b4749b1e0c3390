-- Local Band: rooms, participants, the transcript, the durable per-agent inbound queue,
-- pull-receive leases and the event log. Keep in step with ../postgres/000002_band.up.sql.

-- Event ids are taken inside the writing transaction: writers are lined up (SQLite's
-- IMMEDIATE transactions, Jam's writer lock on Postgres), so ids are handed out in commit
-- order and a reader paging "after N" never skips a row that commits later with a smaller
-- number. A message's seq is the id of its message_posted event.
CREATE TABLE counters (
    name  TEXT NOT NULL PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO counters (name, value) VALUES ('events', 0);

CREATE UNIQUE INDEX agents_api_key_hash ON agents (api_key_hash) WHERE api_key_hash IS NOT NULL;

CREATE TABLE rooms (
    id         TEXT NOT NULL PRIMARY KEY,
    name       TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);

CREATE TABLE room_participants (
    id         TEXT NOT NULL PRIMARY KEY,
    room_id    TEXT NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('human', 'agent')),
    agent_id   TEXT REFERENCES agents (id) ON DELETE CASCADE,
    human_name TEXT,
    active     BOOLEAN NOT NULL,
    created_at TIMESTAMP NOT NULL,
    removed_at TIMESTAMP,
    CHECK ((kind = 'agent' AND agent_id IS NOT NULL AND human_name IS NULL)
        OR (kind = 'human' AND human_name IS NOT NULL AND agent_id IS NULL))
);
CREATE UNIQUE INDEX one_active_agent_participant ON room_participants (room_id, agent_id) WHERE active AND kind = 'agent';
CREATE UNIQUE INDEX one_active_human_participant ON room_participants (room_id, human_name) WHERE active AND kind = 'human';
CREATE INDEX room_participants_agent ON room_participants (agent_id) WHERE active;

CREATE TABLE messages (
    id              TEXT NOT NULL PRIMARY KEY,
    seq             INTEGER NOT NULL UNIQUE,
    room_id         TEXT NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    author_kind     TEXT NOT NULL CHECK (author_kind IN ('human', 'agent')),
    author_agent_id TEXT REFERENCES agents (id) ON DELETE SET NULL,
    author_human    TEXT,
    text            TEXT NOT NULL,
    reply_to        TEXT REFERENCES messages (id),
    created_at      TIMESTAMP NOT NULL
);
CREATE INDEX messages_room_seq ON messages (room_id, seq);

-- One row per (recipient agent, message): queued -> delivered -> settled (reply | ack).
CREATE TABLE inbound (
    agent_id         TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    message_id       TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    room_id          TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('queued', 'delivered', 'settled')),
    settlement       TEXT CHECK (settlement IN ('reply', 'ack')),
    reply_message_id TEXT REFERENCES messages (id),
    lease_id         TEXT,
    delivery_count   INTEGER NOT NULL DEFAULT 0,
    created_at       TIMESTAMP NOT NULL,
    delivered_at     TIMESTAMP,
    settled_at       TIMESTAMP,
    PRIMARY KEY (agent_id, message_id),
    CHECK ((state = 'settled') = (settlement IS NOT NULL))
);
CREATE INDEX inbound_unsettled ON inbound (agent_id, seq) WHERE state <> 'settled';
CREATE INDEX inbound_room_unsettled ON inbound (room_id, agent_id) WHERE state <> 'settled';

-- A pull receiver's lease: at most one waiter at a time. A message delivered on a lease
-- (inbound.lease_id) stays fenced to it until settled, or until the lease goes stale.
CREATE TABLE receive_leases (
    id           TEXT NOT NULL PRIMARY KEY,
    agent_id     TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    waiter       TEXT,
    waiter_until TIMESTAMP,
    touched_at   TIMESTAMP NOT NULL,
    created_at   TIMESTAMP NOT NULL
);
CREATE INDEX receive_leases_agent ON receive_leases (agent_id);

-- The event log behind GET /v1/events; ids come from counters.events (commit order).
CREATE TABLE events (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL,
    room_id    TEXT,
    agent_id   TEXT,
    payload    TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX events_room ON events (room_id, id) WHERE room_id IS NOT NULL;
CREATE INDEX events_agent ON events (agent_id, id) WHERE agent_id IS NOT NULL;
