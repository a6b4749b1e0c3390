-- A node's `sbx` support as its worker last probed it (issue 26): sandboxed runtimes are
-- placed only on nodes that can run them. '' is "not probed yet".
ALTER TABLE nodes ADD COLUMN sandbox TEXT NOT NULL DEFAULT '';
