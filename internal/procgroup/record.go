package procgroup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jam-dev/jam/internal/privatefile"
)

// Record is one persisted process group: enough to prove, after the worker that wrote it is
// gone, that a group found under the same id is still that group.
type Record struct {
	PGID      int `json:"pgid"`
	LeaderPID int `json:"leader_pid"`
	// LeaderStart is the leader's start time in clock ticks since boot.
	LeaderStart uint64 `json:"leader_start_ticks"`
	BootID      string `json:"boot_id"`
	// PIDNamespace: pids recorded in one namespace mean nothing in another.
	PIDNamespace string `json:"pid_namespace"`
	// Session is the leader's session id; every member the group gains inherits it.
	Session int `json:"session_id"`
	// Owner and OwnerStart identify the worker process that started the group: while it
	// lives, the group is its to manage.
	Owner      int    `json:"owner_pid"`
	OwnerStart uint64 `json:"owner_start_ticks"`
	// RuntimeSession is for logs.
	RuntimeSession string    `json:"runtime_session,omitempty"`
	RecordedAt     time.Time `json:"recorded_at"`
}

// fileName is unique per group instance: a later group reusing the pgid gets its own file,
// so removing one record never removes another's.
func (r Record) fileName() string {
	return strconv.Itoa(r.PGID) + "-" + strconv.FormatUint(r.LeaderStart, 10) + ".json"
}

// Recorder writes the records of the groups one worker process starts into one directory.
type Recorder struct {
	dir   string
	sys   System
	boot  string
	pidns string
	self  Stat
}

// NewRecorder prepares dir (created mode 0700) and reads this process's identity once.
func NewRecorder(dir string, sys System) (*Recorder, error) {
	if sys == nil {
		sys = Host
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("process group records: %w", err)
	}
	boot, err := sys.BootID()
	if err != nil {
		return nil, fmt.Errorf("process group records: %w", err)
	}
	pidns, err := sys.PIDNamespace()
	if err != nil {
		return nil, fmt.Errorf("process group records: %w", err)
	}
	self, err := sys.Stat(sys.Self())
	if err != nil {
		return nil, fmt.Errorf("process group records: %w", err)
	}
	return &Recorder{dir: dir, sys: sys, boot: boot, pidns: pidns, self: self}, nil
}

// ErrLeaderGone: the leader was already reaped when its group was to be recorded, so there is
// no identity to record (and the reaper of its exit sweeps the group).
var ErrLeaderGone = errors.New("process group leader already reaped")

// Add records the group led by pid, which must be a child this process has not reaped yet.
func (r *Recorder) Add(pid int, runtimeSession string) (Record, error) {
	st, err := r.sys.Stat(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, fmt.Errorf("record process group %d: %w", pid, ErrLeaderGone)
	}
	if err != nil {
		return Record{}, fmt.Errorf("record process group %d: %w", pid, err)
	}
	rec := Record{PGID: pid, LeaderPID: pid, LeaderStart: st.Start, BootID: r.boot, PIDNamespace: r.pidns,
		Session: st.Session, Owner: r.self.PID, OwnerStart: r.self.Start, RuntimeSession: runtimeSession,
		RecordedAt: time.Now().UTC()}
	b, err := json.Marshal(rec)
	if err != nil {
		return Record{}, fmt.Errorf("record process group %d: %w", pid, err)
	}
	if err := privatefile.Replace(filepath.Join(r.dir, rec.fileName()), b); err != nil {
		return Record{}, fmt.Errorf("record process group %d: %w", pid, err)
	}
	return rec, nil
}

// Remove deletes the record of a group that has been reaped.
func (r *Recorder) Remove(rec Record) error { return remove(r.dir, rec) }

func remove(dir string, rec Record) error {
	err := os.Remove(filepath.Join(dir, rec.fileName()))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove process group record %d: %w", rec.PGID, err)
	}
	return nil
}

// load reads every record in dir. A file that is not a record (unreadable, or not the JSON
// Add writes) is returned by name in bad; it proves nothing and is never acted on.
func load(dir string) (recs []Record, bad []string, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list process group records: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		// privatefile's temporary files start with a dot; they are a write in progress or
		// one a crash cut short, never a record.
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		var rec Record
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err != nil || rec.PGID <= 0 || rec.LeaderPID <= 0 || rec.fileName() != name {
			bad = append(bad, name)
			continue
		}
		recs = append(recs, rec)
	}
	return recs, bad, nil
}
