// Package schema holds Jam's database migrations for Postgres and SQLite, embedded in the
// binary, and runs them with golang-migrate.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepg "github.com/golang-migrate/migrate/v4/database/postgres"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// Dialect names a supported database.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

//go:embed migrations
var migrations embed.FS

// Migrations returns the migration files of a dialect (NNNNNN_name.{up,down}.sql).
func Migrations(d Dialect) (fs.FS, error) {
	switch d {
	case Postgres, SQLite:
		return fs.Sub(migrations, "migrations/"+string(d))
	default:
		return nil, fmt.Errorf("unknown database dialect %q", d)
	}
}

// Version is the state of a database's schema.
type Version struct {
	Version uint
	Dirty   bool
	// Latest is the newest migration embedded in this binary.
	Latest uint
}

// Up applies every pending migration.
func Up(ctx context.Context, d Dialect, db *sql.DB) error {
	return run(ctx, d, db, func(m *migrate.Migrate) error {
		if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("migrate up: %w", err)
		}
		return nil
	})
}

// Down reverts the newest `steps` migrations (all of them when steps <= 0).
func Down(ctx context.Context, d Dialect, db *sql.DB, steps int) error {
	return run(ctx, d, db, func(m *migrate.Migrate) error {
		var err error
		if steps <= 0 {
			err = m.Down()
		} else {
			err = m.Steps(-steps)
		}
		if err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("migrate down: %w", err)
		}
		return nil
	})
}

// Force records version as applied and clean without running anything (0: nothing applied):
// the way out after a migration failed part way and the operator repaired the database by hand.
func Force(ctx context.Context, d Dialect, db *sql.DB, version uint) error {
	latest, err := LatestVersion(d)
	if err != nil {
		return err
	}
	if version > latest {
		return fmt.Errorf("migrate force %d: the newest migration in this binary is %d", version, latest)
	}
	target := int(version)
	if version == 0 {
		target = -1 // golang-migrate's "no version"
	}
	return run(ctx, d, db, func(m *migrate.Migrate) error {
		if err := m.Force(target); err != nil {
			return fmt.Errorf("migrate force %d: %w", version, err)
		}
		return nil
	})
}

// CurrentVersion reports the applied version (0: nothing applied). It only reads: a
// database that was never migrated is left untouched.
func CurrentVersion(ctx context.Context, d Dialect, db *sql.DB) (Version, error) {
	var out Version
	latest, err := LatestVersion(d)
	if err != nil {
		return out, err
	}
	out.Latest = latest
	var exists bool
	switch d {
	case Postgres:
		err = db.QueryRowContext(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists)
	case SQLite:
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&exists)
	default:
		err = fmt.Errorf("unknown database dialect %q", d)
	}
	if err != nil {
		return out, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return out, nil
	}
	var version int64
	err = db.QueryRowContext(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&version, &out.Dirty)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return out, nil
	case err != nil:
		return out, fmt.Errorf("read schema version: %w", err)
	}
	if version > 0 {
		out.Version = uint(version)
	}
	return out, nil
}

// LatestVersion is the newest migration embedded for a dialect.
func LatestVersion(d Dialect) (uint, error) {
	sub, err := Migrations(d)
	if err != nil {
		return 0, err
	}
	src, err := iofs.New(sub, ".")
	if err != nil {
		return 0, fmt.Errorf("read embedded migrations: %w", err)
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, fmt.Errorf("read embedded migrations: %w", err)
	}
	for {
		next, err := src.Next(v)
		if errors.Is(err, fs.ErrNotExist) {
			return v, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read embedded migrations: %w", err)
		}
		v = next
	}
}

func run(ctx context.Context, d Dialect, db *sql.DB, fn func(*migrate.Migrate) error) error {
	sub, err := Migrations(d)
	if err != nil {
		return err
	}
	src, err := iofs.New(sub, ".")
	if err != nil {
		return fmt.Errorf("read embedded migrations: %w", err)
	}
	defer src.Close()

	// The drivers' Close would close the caller's *sql.DB, so the migrate instance is never
	// closed here; Postgres gets a dedicated connection that is released instead.
	var driver database.Driver
	switch d {
	case Postgres:
		conn, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("migrate: connect: %w", err)
		}
		defer conn.Close()
		if driver, err = migratepg.WithConnection(ctx, conn, &migratepg.Config{}); err != nil {
			return fmt.Errorf("migrate: postgres driver: %w", err)
		}
	case SQLite:
		if driver, err = migratesqlite.WithInstance(db, &migratesqlite.Config{}); err != nil {
			return fmt.Errorf("migrate: sqlite driver: %w", err)
		}
	}
	m, err := migrate.NewWithInstance("iofs", src, string(d), driver)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return fn(m)
}
