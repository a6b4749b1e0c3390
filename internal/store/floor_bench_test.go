package store

import (
	"context"
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/jam-dev/jam/internal/testsupport/testdb"
)

// postFloorScript is one post as SQL, for pgbench: the writes PostMessage makes (a message,
// its inbound row, two events, their foreign-key checks and indexes) in the same four round
// trips (BEGIN; locks, participants and event ids; the writes; COMMIT) — the locks ride
// with the participants read here, as pgbench's prepared mode cannot add them to BEGIN.
//
//go:embed testdata/post_floor.sql
var postFloorScript string

// BenchmarkPostFloorPgbench measures what Postgres itself sustains for ConcurrentPosters'
// transaction: 32 pgbench clients (C, prepared statements, no Jam and no Go in the way)
// posting as the benchmark's 32 posters do, for 10 s. ConcurrentPosters/postgres below this
// figure is Jam's own cost; this figure is the floor the machine sets. Needs pgbench.
//
//	go test -run '^$' -bench PostFloorPgbench -benchtime 1x -count 3 ./internal/store/
func BenchmarkPostFloorPgbench(b *testing.B) {
	if os.Getenv(testdb.EnvURL) == "" {
		b.Skip("set " + testdb.EnvURL)
	}
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		b.Skip("pgbench is not installed")
	}
	ctx := context.Background()
	url := testdb.PostgresURL(b)
	s := openTest(b, url)
	rooms := benchRooms(b, s, benchPosterCount)
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE bench_rooms (i bigint PRIMARY KEY, room uuid NOT NULL, agent uuid NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	for i, room := range rooms {
		if _, err := s.DB().ExecContext(ctx, `INSERT INTO bench_rooms SELECT $1, room_id, agent_id FROM room_participants
WHERE room_id = $2 AND kind = 'agent'`, i, room); err != nil {
			b.Fatal(err)
		}
	}
	script := filepath.Join(b.TempDir(), "post.sql")
	if err := os.WriteFile(script, []byte(postFloorScript), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var tps float64
	for range b.N {
		out, err := exec.CommandContext(ctx, pgbench, "-n", "-f", script, "-c", strconv.Itoa(benchPosterCount), "-j", "2",
			"-M", "prepared", "-T", "10", url).CombinedOutput()
		if err != nil {
			b.Fatalf("pgbench: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			b.Fatalf("pgbench printed no tps:\n%s", out)
		}
		if tps, err = strconv.ParseFloat(string(m[1]), 64); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(tps, "posts/s")
}
