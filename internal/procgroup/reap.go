package procgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Verdict is what may be done about one record.
type Verdict int

const (
	// Keep leaves the record alone: the worker that wrote it still runs.
	Keep Verdict = iota
	// Drop deletes the record and signals nothing: the recorded group is provably gone, or
	// the group now under its id is provably another.
	Drop
	// Kill: the group under the record's id is proven to be the recorded one.
	Kill
)

func (v Verdict) String() string {
	switch v {
	case Keep:
		return "keep"
	case Drop:
		return "drop"
	case Kill:
		return "kill"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Decision is a verdict with its evidence.
type Decision struct {
	Verdict Verdict
	Reason  string
	// Members are the group's live processes when it was judged (Kill only).
	Members []int
	// StrayLeader is the proven leader when it has left its group, to be killed by pid.
	StrayLeader int
}

// Judge decides what the record permits. It relies on two kernel rules: a pid is never
// handed out while it still names a live process, process group or session, and a group id
// is always the pid of the process that created the group. So the recorded group is still
// there exactly when it never emptied; the checks below tell such a group from one a later
// process created under the same id after ours was gone.
func Judge(rec Record, sys System) (Decision, error) {
	boot, err := sys.BootID()
	if err != nil {
		return Decision{}, err
	}
	if rec.BootID != boot {
		return Decision{Verdict: Drop, Reason: "recorded before the machine last booted"}, nil
	}
	ns, err := sys.PIDNamespace()
	if err != nil {
		return Decision{}, err
	}
	if rec.PIDNamespace != ns {
		// Its pids do not name our processes; its namespace (a container) took its
		// processes with it or is out of reach.
		return Decision{Verdict: Drop, Reason: "recorded in another pid namespace " + rec.PIDNamespace}, nil
	}
	if rec.Owner > 0 {
		switch st, err := sys.Stat(rec.Owner); {
		case err == nil && st.Start == rec.OwnerStart && !st.Dead():
			return Decision{Verdict: Keep, Reason: fmt.Sprintf("its worker (pid %d) is still running", rec.Owner)}, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return Decision{}, err
		}
	}
	self, err := sys.Stat(sys.Self())
	if err != nil {
		return Decision{}, err
	}
	if self.PGRP == rec.PGID {
		return Decision{Verdict: Drop, Reason: "the group is this worker's own"}, nil
	}
	procs, err := sys.Processes()
	if err != nil {
		return Decision{}, err
	}

	leader, err := sys.Stat(rec.LeaderPID)
	switch {
	case err == nil && leader.Start == rec.LeaderStart:
		// The recorded leader itself: only it can have created a group under its pid.
		d := Decision{Verdict: Kill, Reason: fmt.Sprintf("its leader %d is still there", rec.LeaderPID),
			Members: membersOf(procs, rec.PGID)}
		if !leader.Dead() && leader.PGRP != rec.PGID {
			d.StrayLeader = rec.LeaderPID
		}
		if len(d.Members) == 0 && d.StrayLeader == 0 {
			return Decision{Verdict: Drop, Reason: "the group is gone"}, nil
		}
		return d, nil
	case err == nil:
		// The pid was handed out again, which the kernel does only once nothing used it as
		// a group id: the recorded group had died out.
		return Decision{Verdict: Drop, Reason: fmt.Sprintf("pid %d now belongs to a later process", rec.LeaderPID)}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return Decision{}, err
	}

	// The leader is gone. Every process the group gained descends from the leader, so it
	// started no earlier and inherited its session; a group created later under the same id
	// (after ours emptied and the pid was reused) fails those tests unless it was started in
	// the same session, and then every member must pass them.
	var members []int
	for _, p := range procs {
		if p.PGRP != rec.PGID || p.Dead() {
			continue
		}
		if p.Start < rec.LeaderStart {
			return Decision{Verdict: Drop, Reason: fmt.Sprintf("process %d of group %d started before the recorded leader: another group", p.PID, rec.PGID)}, nil
		}
		if p.Session != rec.Session {
			return Decision{Verdict: Drop, Reason: fmt.Sprintf("process %d of group %d is in session %d, not %d: another group", p.PID, rec.PGID, p.Session, rec.Session)}, nil
		}
		members = append(members, p.PID)
	}
	if len(members) == 0 {
		return Decision{Verdict: Drop, Reason: "the group is gone"}, nil
	}
	return Decision{Verdict: Kill, Reason: fmt.Sprintf("its leader %d is gone; its members started after it in its session", rec.LeaderPID),
		Members: members}, nil
}

func membersOf(procs []Stat, pgid int) []int {
	var out []int
	for _, p := range procs {
		if p.PGRP == pgid && !p.Dead() {
			out = append(out, p.PID)
		}
	}
	return out
}

// ReapWait bounds how long Reap waits for killed groups to disappear.
const ReapWait = 5 * time.Second

// Report is what one Reap did.
type Report struct {
	Killed  []Record
	Dropped []Record
	Kept    []Record
	// Unsettled groups were killed but had not gone within the wait; their records stay.
	Unsettled []Record
}

// Reap settles every record in dir left by a worker that is no longer running: a group
// proven to be the recorded one is killed (SIGKILL to the whole group) and awaited, and the
// record is deleted once nothing of the group is left; a record that proves nothing is just
// deleted. Records of a running worker are kept. Files that are not records are removed.
func Reap(ctx context.Context, dir string, sys System, log *slog.Logger) (Report, error) {
	if sys == nil {
		sys = Host
	}
	var rep Report
	recs, bad, err := load(dir)
	if err != nil {
		return rep, err
	}
	for _, name := range bad {
		log.Warn("removing an unreadable process group record", "file", name)
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("remove process group record", "file", name, "error", err)
		}
	}
	type pending struct {
		rec Record
		d   Decision
	}
	var killed []pending
	for _, rec := range recs {
		d, err := Judge(rec, sys)
		if err != nil {
			// Without the evidence nothing is signalled; the next start judges it again.
			log.Warn("cannot judge a process group record; it stays", "pgid", rec.PGID, "runtime_session", rec.RuntimeSession, "error", err)
			rep.Kept = append(rep.Kept, rec)
			continue
		}
		switch d.Verdict {
		case Keep:
			rep.Kept = append(rep.Kept, rec)
		case Drop:
			log.Info("dropping a process group record: nothing to reap", "pgid", rec.PGID,
				"runtime_session", rec.RuntimeSession, "reason", d.Reason)
			if err := remove(dir, rec); err != nil {
				log.Warn("drop process group record", "pgid", rec.PGID, "error", err)
			}
			rep.Dropped = append(rep.Dropped, rec)
		case Kill:
			if err := sys.Kill(-rec.PGID); err != nil && !errors.Is(err, syscall.ESRCH) {
				log.Warn("kill process group", "pgid", rec.PGID, "error", err)
			}
			if d.StrayLeader > 0 {
				if err := sys.Kill(d.StrayLeader); err != nil && !errors.Is(err, syscall.ESRCH) {
					log.Warn("kill process group leader", "pid", d.StrayLeader, "error", err)
				}
			}
			killed = append(killed, pending{rec, d})
		}
	}
	if len(killed) == 0 {
		return rep, nil
	}

	ctx, cancel := context.WithTimeout(ctx, ReapWait)
	defer cancel()
	for _, k := range killed {
		gone := awaitGone(ctx, sys, k.rec.PGID, k.d.StrayLeader)
		if !gone {
			log.Warn("a killed process group has not gone yet; its record stays", "pgid", k.rec.PGID,
				"runtime_session", k.rec.RuntimeSession)
			rep.Unsettled = append(rep.Unsettled, k.rec)
			continue
		}
		log.Info("reaped a process group left by a previous worker", "pgid", k.rec.PGID,
			"runtime_session", k.rec.RuntimeSession, "processes", k.d.Members, "recorded_at", k.rec.RecordedAt,
			"evidence", k.d.Reason)
		if err := remove(dir, k.rec); err != nil {
			log.Warn("drop process group record", "pgid", k.rec.PGID, "error", err)
		}
		rep.Killed = append(rep.Killed, k.rec)
	}
	return rep, nil
}

// awaitGone polls until no live process is in group pgid (and the stray leader, if any, is
// gone), or ctx ends. Killed orphans are reaped by init; a zombie counts as gone.
func awaitGone(ctx context.Context, sys System, pgid, stray int) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		procs, err := sys.Processes()
		if err == nil {
			left := len(membersOf(procs, pgid)) > 0
			if stray > 0 {
				if st, err := sys.Stat(stray); err == nil && !st.Dead() {
					left = true
				}
			}
			if !left {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
