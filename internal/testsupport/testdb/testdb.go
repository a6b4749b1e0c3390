// Package testdb gives each test a fresh, empty database URL: a temporary SQLite file always,
// and Postgres from JAM_TEST_DATABASE_URL, else from a testcontainers-go container, else
// a skip (or a failure when JAM_REQUIRE_POSTGRES=1). It does not import the store, so the
// store's own tests can use it; teststore wraps it in migrated stores for everyone else.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/lib/pq" // postgres driver for the admin connection
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// EnvURL names an admin URL of a Postgres server where tests may create databases.
const EnvURL = "JAM_TEST_DATABASE_URL"

// EnvRequire makes an unreachable Postgres a test failure instead of a skip (CI sets it).
const EnvRequire = "JAM_REQUIRE_POSTGRES"

// SQLiteURL returns the URL of a new SQLite database file in the test's temp directory.
func SQLiteURL(t testing.TB) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "jam.db")
}

// PostgresURL creates an empty Postgres database for the test and returns its URL; the
// database is dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	admin, err := adminURL()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("Postgres is required (%s=1) but unavailable: %v", EnvRequire, err)
		}
		t.Skipf("Postgres unavailable (set %s): %v", EnvURL, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adminDB, err := sql.Open("postgres", admin)
	if err != nil {
		t.Fatalf("open Postgres admin connection: %v", err)
	}
	defer adminDB.Close()
	name := "jamtest_" + randomHex(8)
	if _, err := adminDB.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("create Postgres test database on %s: %v", redact(admin), err)
		}
		t.Skipf("create Postgres test database on %s: %v", redact(admin), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := sql.Open("postgres", admin)
		if err != nil {
			t.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// ForEachURL runs fn once per dialect as subtests "sqlite" and "postgres", each with a fresh
// empty database.
func ForEachURL(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLiteURL(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, PostgresURL(t)) })
}

var (
	containerOnce sync.Once
	containerURL  string
	containerErr  error
)

// adminURL is JAM_TEST_DATABASE_URL, else the URL of a Postgres container started once per
// test process (testcontainers' reaper removes it when the process ends).
func adminURL() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	containerOnce.Do(func() { containerURL, containerErr = startContainer() })
	return containerURL, containerErr
}

func startContainer() (u string, err error) {
	defer func() {
		// testcontainers panics when no Docker client can be configured at all.
		if r := recover(); r != nil {
			err = fmt.Errorf("no Docker engine for testcontainers: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return "", fmt.Errorf("no Docker engine for testcontainers: %w", err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return "", fmt.Errorf("no Docker engine for testcontainers: %w", err)
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        "postgres:16-alpine",
			Env:          map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"},
			ExposedPorts: []string{"5432/tcp"},
			WaitingFor: wait.ForLog("database system is ready to accept connections").
				WithOccurrence(2).WithStartupTimeout(2 * time.Minute),
		},
		Started: true,
	})
	if err != nil {
		return "", fmt.Errorf("start Postgres container: %w", err)
	}
	host, err := c.Host(ctx)
	if err != nil {
		return "", fmt.Errorf("Postgres container host: %w", err)
	}
	port, err := c.MappedPort(ctx, "5432/tcp")
	if err != nil {
		return "", fmt.Errorf("Postgres container port: %w", err)
	}
	return fmt.Sprintf("postgres://postgres@%s:%s/postgres?sslmode=disable", host, port.Port()), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the configured server"
	}
	return u.Redacted()
}
