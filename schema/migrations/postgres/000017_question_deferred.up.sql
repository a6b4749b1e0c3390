-- A question whose asking tool call returned before it was answered (issue 43: MCP clients
-- give up on a call after about a minute): its answer reaches the asking agent as the room
-- message that gives it, in a turn of its own.
ALTER TABLE questions ADD COLUMN deferred_at TIMESTAMPTZ;
