DROP TABLE IF EXISTS checkpoint_deletions;
