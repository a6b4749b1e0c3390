DROP TABLE IF EXISTS permission_rules;
DROP TABLE IF EXISTS runtime_permissions;
