-- The provider CLIs a node's worker resolved when it last probed them (issue 26), as JSON:
-- host-native runtimes are placed only on nodes where their CLI is installed. '' is "not
-- probed yet".
ALTER TABLE nodes ADD COLUMN clis TEXT NOT NULL DEFAULT '';
