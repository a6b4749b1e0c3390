-- Long operations answered 202: one row per operation, naming the workflow (and update)
-- that carries it. The outcome is cached here once Temporal reports it.
CREATE TABLE operations (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL,
    target_kind   TEXT NOT NULL,
    target_id     TEXT NOT NULL,
    workflow_id   TEXT NOT NULL,
    run_id        TEXT NOT NULL DEFAULT '',
    update_id     TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL DEFAULT 'running',
    result        TEXT,
    failure_class TEXT NOT NULL DEFAULT '',
    failure_code  TEXT NOT NULL DEFAULT '',
    failure_text  TEXT NOT NULL DEFAULT '',
    http_status   INTEGER NOT NULL DEFAULT 0,
    created_at    TIMESTAMP NOT NULL,
    finished_at   TIMESTAMP
);
CREATE INDEX operations_target ON operations (target_kind, target_id, created_at);
