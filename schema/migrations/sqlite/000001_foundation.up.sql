-- Jam foundation schema (SQLite). Keep in step with ../postgres/000001_foundation.up.sql:
-- the store conformance suite runs the same tests against both.
-- Timestamps are UTC; JSON values are stored as text.

CREATE TABLE settings (
    key        TEXT NOT NULL PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE nodes (
    name         TEXT NOT NULL PRIMARY KEY,
    hostname     TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    version      TEXT NOT NULL,
    data_dir     TEXT NOT NULL,
    started_at   TIMESTAMP NOT NULL,
    heartbeat_at TIMESTAMP NOT NULL
);

-- An agent identity; owned agents are run by Jam, attached ones by the user.
CREATE TABLE agents (
    id           TEXT NOT NULL PRIMARY KEY,
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('owned', 'attached')),
    briefing     TEXT NOT NULL DEFAULT '',
    api_key_hash TEXT,
    run_intent   TEXT NOT NULL DEFAULT 'running' CHECK (run_intent IN ('running', 'stopped')),
    created_at   TIMESTAMP NOT NULL,
    updated_at   TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX agents_name ON agents (name);

-- The configuration rooms copy. effective_generation stays 0 on the saved template itself.
CREATE TABLE runtime_templates (
    id                   TEXT NOT NULL PRIMARY KEY,
    agent_id             TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    alias                TEXT NOT NULL,
    config               TEXT NOT NULL,
    desired_generation   INTEGER NOT NULL DEFAULT 1 CHECK (desired_generation >= 1),
    effective_generation INTEGER NOT NULL DEFAULT 0 CHECK (effective_generation >= 0),
    created_at           TIMESTAMP NOT NULL,
    updated_at           TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX runtime_templates_agent_alias ON runtime_templates (agent_id, alias);

-- One runtime context; stable across restarts and renames. instance_generation fences a
-- retired runtime instance out of its successor's turns.
CREATE TABLE runtime_sessions (
    id                  TEXT NOT NULL PRIMARY KEY,
    agent_id            TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    template_id         TEXT NOT NULL REFERENCES runtime_templates (id),
    provider_session_id TEXT,
    instance_generation INTEGER NOT NULL DEFAULT 0,
    created_at          TIMESTAMP NOT NULL,
    updated_at          TIMESTAMP NOT NULL
);

-- The routing row of one room binding: its configuration generations and pending change.
CREATE TABLE host_sessions (
    runtime_session_id   TEXT NOT NULL PRIMARY KEY REFERENCES runtime_sessions (id) ON DELETE CASCADE,
    agent_id             TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    template_id          TEXT NOT NULL REFERENCES runtime_templates (id),
    alias                TEXT NOT NULL,
    room_id              TEXT NOT NULL,
    config               TEXT NOT NULL,
    desired_generation   INTEGER NOT NULL CHECK (desired_generation >= 1),
    effective_generation INTEGER NOT NULL CHECK (effective_generation >= 0),
    pending_change       TEXT,
    removed_at           TIMESTAMP,
    created_at           TIMESTAMP NOT NULL,
    updated_at           TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX host_sessions_agent_alias ON host_sessions (agent_id, alias) WHERE removed_at IS NULL;
CREATE UNIQUE INDEX one_host_session_per_agent_room ON host_sessions (agent_id, room_id) WHERE removed_at IS NULL;

-- One execution boundary: one provider process, one microVM. A Dedicated host's id is its
-- runtime session's id.
CREATE TABLE runtime_hosts (
    id            TEXT NOT NULL PRIMARY KEY,
    agent_id      TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    template_id   TEXT NOT NULL REFERENCES runtime_templates (id),
    placement     TEXT NOT NULL CHECK (placement IN ('shared_agent_host', 'dedicated_session_host')),
    state         TEXT NOT NULL CHECK (state IN ('provisioning', 'active', 'parked', 'archived', 'removed')),
    node          TEXT NOT NULL,
    sandboxed     BOOLEAN NOT NULL,
    sandbox_name  TEXT,
    compatibility TEXT NOT NULL,
    created_at    TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX one_live_shared_runtime_host_per_agent ON runtime_hosts (agent_id)
    WHERE placement = 'shared_agent_host' AND state NOT IN ('archived', 'removed');

-- Membership of a runtime session in its host; the primary key makes it one host per session.
CREATE TABLE runtime_host_sessions (
    runtime_session_id TEXT NOT NULL PRIMARY KEY REFERENCES runtime_sessions (id) ON DELETE CASCADE,
    runtime_host_id    TEXT NOT NULL REFERENCES runtime_hosts (id) ON DELETE CASCADE,
    state              TEXT NOT NULL CHECK (state IN ('active', 'dormant')),
    created_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL
);
CREATE INDEX runtime_host_sessions_host ON runtime_host_sessions (runtime_host_id);

-- Runtime session <-> room. An inactive row is a tombstone an authoritative re-add reuses.
CREATE TABLE room_bindings (
    id                 TEXT NOT NULL PRIMARY KEY,
    agent_id           TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    room_id            TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL REFERENCES runtime_sessions (id) ON DELETE CASCADE,
    active             BOOLEAN NOT NULL,
    generation         INTEGER NOT NULL DEFAULT 1,
    created_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX one_active_runtime_binding_per_agent_room ON room_bindings (agent_id, room_id) WHERE active;
CREATE INDEX room_bindings_session ON room_bindings (runtime_session_id);

CREATE TABLE managed_workspaces (
    id                 TEXT NOT NULL PRIMARY KEY,
    runtime_host_id    TEXT NOT NULL REFERENCES runtime_hosts (id) ON DELETE CASCADE,
    runtime_session_id TEXT NOT NULL UNIQUE REFERENCES runtime_sessions (id) ON DELETE CASCADE,
    source             TEXT NOT NULL CHECK (source IN ('managed', 'private_host_clone', 'direct_host')),
    host_path          TEXT,
    state              TEXT NOT NULL CHECK (state IN ('planned', 'provisioning', 'ready', 'recovering',
                           'provision_failed', 'needs_reconciliation', 'removal_blocked', 'archived', 'removed')),
    created_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL
);
CREATE INDEX managed_workspaces_host ON managed_workspaces (runtime_host_id);

CREATE TABLE workspace_operations (
    id                 TEXT NOT NULL PRIMARY KEY,
    workspace_id       TEXT NOT NULL REFERENCES managed_workspaces (id) ON DELETE CASCADE,
    runtime_host_id    TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    kind               TEXT NOT NULL CHECK (kind IN ('provision', 'clone', 'branch', 'commit', 'push',
                           'pull_request', 'checks', 'archive', 'export', 'restore', 'remove', 'reconcile')),
    state              TEXT NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    intent             TEXT NOT NULL DEFAULT '',
    result_class       TEXT NOT NULL DEFAULT '',
    error              TEXT NOT NULL DEFAULT '',
    started_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL,
    finished_at        TIMESTAMP
);
CREATE UNIQUE INDEX one_running_operation_per_workspace ON workspace_operations (workspace_id) WHERE state = 'running';

CREATE TABLE workspace_operation_events (
    operation_id TEXT NOT NULL REFERENCES workspace_operations (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    state        TEXT NOT NULL,
    result_class TEXT NOT NULL,
    error        TEXT NOT NULL,
    recorded_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (operation_id, seq)
);

-- Immutable checkpoint generations; the payload may be deleted, the metadata never is.
CREATE TABLE provider_checkpoints (
    id                TEXT NOT NULL PRIMARY KEY,
    runtime_host_id   TEXT NOT NULL REFERENCES runtime_hosts (id) ON DELETE CASCADE,
    reason            TEXT NOT NULL CHECK (reason IN ('after_turn', 'before_stop', 'before_reset', 'before_remove', 'manual')),
    provider          TEXT NOT NULL,
    provider_version  TEXT NOT NULL,
    sessions          TEXT NOT NULL,
    manifest_checksum TEXT NOT NULL,
    payload_bytes     INTEGER NOT NULL,
    payload_deleted_at TIMESTAMP,
    created_at        TIMESTAMP NOT NULL
);
CREATE INDEX provider_checkpoints_host ON provider_checkpoints (runtime_host_id, created_at);

-- One immutable row per exact-resume attempt.
CREATE TABLE provider_resume_observations (
    id                           TEXT NOT NULL PRIMARY KEY,
    checkpoint_id                TEXT NOT NULL REFERENCES provider_checkpoints (id) ON DELETE CASCADE,
    runtime_session_id           TEXT NOT NULL,
    expected_provider_session_id TEXT NOT NULL,
    outcome                      TEXT NOT NULL CHECK (outcome IN ('succeeded', 'failed')),
    detail                       TEXT NOT NULL DEFAULT '',
    recorded_at                  TIMESTAMP NOT NULL
);
CREATE INDEX provider_resume_observations_checkpoint ON provider_resume_observations (checkpoint_id, runtime_session_id);

-- Immutable exports; the owner triple never changes, so a restore can prove it.
CREATE TABLE workspace_exports (
    id                 TEXT NOT NULL PRIMARY KEY,
    workspace_id       TEXT NOT NULL REFERENCES managed_workspaces (id),
    runtime_host_id    TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    checkpoint_id      TEXT REFERENCES provider_checkpoints (id),
    manifest_checksum  TEXT NOT NULL,
    bytes              INTEGER NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    deleted_at         TIMESTAMP
);
CREATE INDEX workspace_exports_workspace ON workspace_exports (workspace_id, created_at);

CREATE TABLE host_cleanup_operations (
    id                         TEXT NOT NULL PRIMARY KEY,
    runtime_host_id            TEXT NOT NULL UNIQUE REFERENCES runtime_hosts (id),
    stage                      TEXT NOT NULL CHECK (stage IN ('prepared', 'sandbox_removed', 'root_removed', 'succeeded')),
    planned_runtime_host_bytes INTEGER NOT NULL,
    removed_runtime_host_bytes INTEGER NOT NULL,
    retained_export_bytes      INTEGER NOT NULL,
    last_error                 TEXT NOT NULL DEFAULT '',
    created_at                 TIMESTAMP NOT NULL,
    updated_at                 TIMESTAMP NOT NULL
);

CREATE TABLE host_cleanup_events (
    operation_id TEXT NOT NULL REFERENCES host_cleanup_operations (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    stage        TEXT NOT NULL,
    last_error   TEXT NOT NULL,
    recorded_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (operation_id, seq)
);

-- Immutable record mapping every source session and binding to its replacement.
CREATE TABLE continuity_resets (
    id                     TEXT NOT NULL PRIMARY KEY,
    source_runtime_host_id TEXT NOT NULL UNIQUE REFERENCES runtime_hosts (id),
    evidence_checksum      TEXT NOT NULL,
    mapping                TEXT NOT NULL,
    created_at             TIMESTAMP NOT NULL
);
