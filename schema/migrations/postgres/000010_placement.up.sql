-- Placement by load (issue 26). A node says how many runtimes it may carry (0: no limit)
-- and whether an operator drains it. A placement is one room session's runtime slot on a
-- node: taken when a wake places the runtime (so two wakes at once cannot both take a
-- node's last slot), confirmed when the runtime started, dropped when it ends. An
-- unconfirmed placement counts for a bounded time only, so a wake that never started its
-- runtime does not hold the slot for ever.
ALTER TABLE nodes ADD COLUMN max_runtimes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN draining BOOLEAN NOT NULL DEFAULT FALSE;
CREATE TABLE runtime_placements (
    runtime_session_id UUID PRIMARY KEY,
    node               TEXT NOT NULL,
    placed_at          TIMESTAMPTZ NOT NULL,
    confirmed_at       TIMESTAMPTZ
);
CREATE INDEX runtime_placements_node ON runtime_placements (node);
