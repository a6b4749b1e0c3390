#!/bin/sh
# Creates Temporal's databases on the compose Postgres and applies its versioned schema.
# Every step is idempotent, so this runs on each `docker compose up`.
set -eu
host="${POSTGRES_HOST:-postgres}"
user="${POSTGRES_USER:-jam}"
schema_root=/etc/temporal/schema/postgresql/v12

until nc -z -w 2 "$host" 5432; do
  echo "waiting for postgres at $host:5432"
  sleep 1
done

for db in temporal temporal_visibility; do
  case "$db" in
    temporal) dir="$schema_root/temporal/versioned" ;;
    *) dir="$schema_root/visibility/versioned" ;;
  esac
  tool="temporal-sql-tool --plugin postgres12 --ep $host -p 5432 -u $user --db $db"
  $tool create || echo "database $db already exists"
  $tool setup-schema -v 0.0 || echo "schema of $db already set up"
  $tool update-schema -d "$dir"
done
echo "temporal schema ready"
