package procgroup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func statLine(pid int, comm string, state byte, pgrp, sid int, start uint64) string {
	// Fields 3..52; only state (3), pgrp (5), session (6) and starttime (22) matter here.
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[0], f[2], f[3], f[19] = string(state), fmt.Sprint(pgrp), fmt.Sprint(sid), fmt.Sprint(start)
	return fmt.Sprintf("%d (%s) %s\n", pid, comm, strings.Join(f, " "))
}

func TestParseStatCountsFieldsFromTheLastParenthesis(t *testing.T) {
	st, err := parseStat([]byte(statLine(4242, "a) b (c) S 1 2", 'S', 4200, 77, 123456789)))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, State: 'S', PGRP: 4200, Session: 77, Start: 123456789}
	if st != want {
		t.Fatalf("parsed %+v, want %+v", st, want)
	}
	for _, bad := range []string{"", "12 (x) S 1 2 3", "x (y) S" + strings.Repeat(" 1", 30), "12 x) S" + strings.Repeat(" 1", 30)} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil || st.PID != os.Getpid() || st.Start == 0 || st.PGRP == 0 {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing pid: %v", err)
	}
}

// fakeSys is a machine made of a process table; Kill removes what it hits.
type fakeSys struct {
	boot, ns string
	self     int
	procs    map[int]Stat
	kills    []int
}

func (f *fakeSys) BootID() (string, error)       { return f.boot, nil }
func (f *fakeSys) PIDNamespace() (string, error) { return f.ns, nil }
func (f *fakeSys) Self() int                     { return f.self }
func (f *fakeSys) Stat(pid int) (Stat, error) {
	if st, ok := f.procs[pid]; ok {
		return st, nil
	}
	return Stat{}, fmt.Errorf("stat of process %d: %w", pid, fs.ErrNotExist)
}
func (f *fakeSys) Processes() ([]Stat, error) {
	var out []Stat
	for _, st := range f.procs {
		out = append(out, st)
	}
	return out, nil
}
func (f *fakeSys) Kill(pid int) error {
	f.kills = append(f.kills, pid)
	for p, st := range f.procs {
		if (pid < 0 && st.PGRP == -pid) || p == pid {
			delete(f.procs, p)
		}
	}
	return nil
}

func (f *fakeSys) add(sts ...Stat) *fakeSys {
	for _, st := range sts {
		if st.State == 0 {
			st.State = 'S'
		}
		f.procs[st.PID] = st
	}
	return f
}

// machine is the restarted worker's view: the new worker (pid 900) in session 42, the old
// worker (pid 300) gone.
func machine() *fakeSys {
	return (&fakeSys{boot: "boot-1", ns: "pid:[1]", self: 900, procs: map[int]Stat{}}).
		add(Stat{PID: 900, PGRP: 900, Session: 42, Start: 9000})
}

// recorded is group 500, led by pid 500 started at tick 1000 in session 42 by worker 300.
func recorded() Record {
	return Record{PGID: 500, LeaderPID: 500, LeaderStart: 1000, BootID: "boot-1", PIDNamespace: "pid:[1]",
		Session: 42, Owner: 300, OwnerStart: 100, RuntimeSession: "s"}
}

func TestJudgeSignalsOnlyAGroupTiedToItsRecord(t *testing.T) {
	orphan := Stat{PID: 510, PGRP: 500, Session: 42, Start: 1500}
	cases := []struct {
		name    string
		rec     func(*Record)
		sys     func(*fakeSys)
		want    Verdict
		members []int
	}{
		{name: "leader gone, orphans started after it in its session", sys: func(f *fakeSys) { f.add(orphan) },
			want: Kill, members: []int{510}},
		{name: "the leader itself still there", sys: func(f *fakeSys) {
			f.add(Stat{PID: 500, PGRP: 500, Session: 42, Start: 1000}, orphan)
		}, want: Kill, members: []int{500, 510}},
		{name: "a zombie leader still names the group", sys: func(f *fakeSys) {
			f.add(Stat{PID: 500, State: 'Z', PGRP: 500, Session: 42, Start: 1000}, orphan)
		}, want: Kill, members: []int{510}},
		{name: "another boot", rec: func(r *Record) { r.BootID = "boot-0" }, sys: func(f *fakeSys) { f.add(orphan) }, want: Drop},
		{name: "another pid namespace", rec: func(r *Record) { r.PIDNamespace = "pid:[2]" }, sys: func(f *fakeSys) { f.add(orphan) }, want: Drop},
		{name: "its worker still runs", sys: func(f *fakeSys) {
			f.add(Stat{PID: 300, PGRP: 300, Session: 42, Start: 100}, orphan)
		}, want: Keep},
		{name: "the worker's pid reused by a later process", sys: func(f *fakeSys) {
			f.add(Stat{PID: 300, PGRP: 300, Session: 42, Start: 5000}, orphan)
		}, want: Kill, members: []int{510}},
		{name: "the leader's pid reused: a later process started at another tick", sys: func(f *fakeSys) {
			f.add(Stat{PID: 500, PGRP: 500, Session: 42, Start: 7000}, Stat{PID: 510, PGRP: 500, Session: 42, Start: 7100})
		}, want: Drop},
		{name: "a reused group id holding a process older than the leader", sys: func(f *fakeSys) {
			f.add(Stat{PID: 510, PGRP: 500, Session: 42, Start: 999}, Stat{PID: 511, PGRP: 500, Session: 42, Start: 2000})
		}, want: Drop},
		{name: "a reused group id in another session", sys: func(f *fakeSys) {
			f.add(Stat{PID: 510, PGRP: 500, Session: 77, Start: 8000})
		}, want: Drop},
		{name: "one member in another session spoils the proof", sys: func(f *fakeSys) {
			f.add(orphan, Stat{PID: 511, PGRP: 500, Session: 77, Start: 8000})
		}, want: Drop},
		{name: "the group is gone", want: Drop},
		{name: "only a zombie is left", sys: func(f *fakeSys) { f.add(Stat{PID: 510, State: 'Z', PGRP: 500, Session: 42, Start: 1500}) }, want: Drop},
		{name: "the group is this worker's own", sys: func(f *fakeSys) {
			f.add(Stat{PID: 900, PGRP: 500, Session: 42, Start: 9000}, orphan)
		}, want: Drop},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, sys := recorded(), machine()
			if tc.rec != nil {
				tc.rec(&rec)
			}
			if tc.sys != nil {
				tc.sys(sys)
			}
			d, err := Judge(rec, sys)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(d.Members)
			if d.Verdict != tc.want || !slices.Equal(d.Members, tc.members) {
				t.Fatalf("%s (%s) members %v, want %s members %v", d.Verdict, d.Reason, d.Members, tc.want, tc.members)
			}
			if len(sys.kills) != 0 {
				t.Fatalf("judging signalled %v", sys.kills)
			}
		})
	}
}

// Records written by one worker and settled by the next: only the proven group is signalled,
// only the record of a worker that still runs stays, and a file that is no record goes.
func TestReapKillsProvenGroupsAndOnlyDropsTheRest(t *testing.T) {
	dir := t.TempDir()
	old := (&fakeSys{boot: "boot-1", ns: "pid:[1]", self: 300, procs: map[int]Stat{}}).add(
		Stat{PID: 300, PGRP: 300, Session: 42, Start: 100},
		Stat{PID: 500, PGRP: 500, Session: 42, Start: 1000}, // proven after the crash by its orphan
		Stat{PID: 600, PGRP: 600, Session: 42, Start: 1100}, // its pid is reused after the crash
		Stat{PID: 700, PGRP: 700, Session: 42, Start: 1200}, // its group id is reused after the crash
	)
	rc, err := NewRecorder(dir, old)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{500, 600, 700} {
		if _, err := rc.Add(pid, fmt.Sprint("session-", pid)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A record of another, still running worker on the same machine.
	live := recorded()
	live.PGID, live.LeaderPID, live.Owner, live.OwnerStart = 800, 800, 350, 150
	writeRecord(t, dir, live)

	now := machine().add(
		Stat{PID: 350, PGRP: 350, Session: 42, Start: 150},
		Stat{PID: 801, PGRP: 800, Session: 42, Start: 1600},
		Stat{PID: 510, PGRP: 500, Session: 42, Start: 1500},
		Stat{PID: 600, PGRP: 600, Session: 42, Start: 8000},
		Stat{PID: 601, PGRP: 600, Session: 42, Start: 8001},
		Stat{PID: 701, PGRP: 700, Session: 42, Start: 800}, // older than the recorded leader 700
	)
	rep, err := Reap(context.Background(), dir, now, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(now.kills, []int{-500}) {
		t.Fatalf("signalled %v, want only the proven group -500", now.kills)
	}
	if len(rep.Killed) != 1 || rep.Killed[0].PGID != 500 || len(rep.Dropped) != 2 || len(rep.Kept) != 1 || rep.Kept[0].PGID != 800 {
		t.Fatalf("report %+v", rep)
	}
	for _, pid := range []int{600, 601, 701, 801} {
		if _, ok := now.procs[pid]; !ok {
			t.Fatalf("process %d was hit", pid)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != live.fileName() {
		t.Fatalf("left in the directory: %v, want only the running worker's record", entries)
	}
}

func writeRecord(t *testing.T, dir string, rec Record) {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rec.fileName()), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRecorderWritesOnePrivateFilePerGroupAndRemovesIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "process-groups")
	rc, err := NewRecorder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rc.Add(os.Getpid(), "the-session")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := ReadStat(os.Getpid())
	boot, _ := Host.BootID()
	if rec.PGID != os.Getpid() || rec.LeaderStart != self.Start || rec.BootID != boot || rec.Session != self.Session ||
		rec.Owner != os.Getpid() || rec.RuntimeSession != "the-session" {
		t.Fatalf("record %+v", rec)
	}
	fi, err := os.Stat(filepath.Join(dir, rec.fileName()))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record file: %v %v", fi, err)
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v", di.Mode().Perm())
	}
	recs, bad, err := load(dir)
	if err != nil || len(bad) != 0 || len(recs) != 1 || recs[0].LeaderStart != rec.LeaderStart {
		t.Fatalf("loaded %+v %v %v", recs, bad, err)
	}
	if _, err := rc.Add(1<<30, ""); !errors.Is(err, ErrLeaderGone) {
		t.Fatalf("a reaped leader: %v", err)
	}
	if err := rc.Remove(rec); err != nil {
		t.Fatal(err)
	}
	if err := rc.Remove(rec); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left: %v", entries)
	}
}
