// Package procgroup persists the process groups a node's worker starts its provider children
// in, and at the next worker start kills what a killed worker left behind: the provider itself
// dies with its worker (Pdeathsig), but its own children are re-parented to init and would
// otherwise live on unowned.
//
// A group is signalled only when /proc proves it is the recorded one; process ids and process
// group ids are reused, so a record alone never justifies a signal.
package procgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Stat is what /proc/<pid>/stat says about one process.
type Stat struct {
	PID     int
	State   byte
	PGRP    int
	Session int
	// Start is the process's start time in clock ticks since boot (field 22): with the boot
	// id it tells a process from a later one that reused its pid.
	Start uint64
	// CPUTicks is the user and system time it has used, in clock ticks (fields 14 and 15).
	CPUTicks uint64
	// RSSPages is its resident set in pages (field 24).
	RSSPages int64
}

// Dead: the process has exited and only its exit status is left (zombie or dying).
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// System is the view of the machine the records are judged against; Host reads /proc.
type System interface {
	BootID() (string, error)
	PIDNamespace() (string, error)
	// Stat returns an error satisfying errors.Is(err, fs.ErrNotExist) for a missing pid.
	Stat(pid int) (Stat, error)
	// Processes lists every process (thread-group leaders) visible now.
	Processes() ([]Stat, error)
	Self() int
	// Kill sends SIGKILL to pid, or to the group -pid when pid is negative.
	Kill(pid int) error
}

// Host is the machine this process runs on.
var Host System = host{}

type host struct{}

func (host) BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (host) PIDNamespace() (string, error) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", fmt.Errorf("read pid namespace: %w", err)
	}
	return ns, nil
}

func (host) Stat(pid int) (Stat, error) { return ReadStat(pid) }

func (host) Processes() ([]Stat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := make([]Stat, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		st, err := ReadStat(pid)
		if err != nil {
			continue // exited while listing
		}
		out = append(out, st)
	}
	return out, nil
}

func (host) Self() int { return os.Getpid() }

func (host) Kill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, syscall.ESRCH) {
		// The process went away between open and read.
		err = fs.ErrNotExist
	}
	if err != nil {
		return Stat{}, fmt.Errorf("stat of process %d: %w", pid, err)
	}
	st, err := parseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("stat of process %d: %w", pid, err)
	}
	return st, nil
}

var errMalformedStat = errors.New("malformed /proc stat line")

// parseStat parses "pid (comm) state ppid pgrp session ... starttime ...". comm may hold
// spaces and parentheses, so the fields are counted from the last ')'.
func parseStat(b []byte) (Stat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return Stat{}, errMalformedStat
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return Stat{}, errMalformedStat
	}
	// f[0] is field 3 (state), so field n is f[n-3].
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 22 || len(f[0]) != 1 {
		return Stat{}, errMalformedStat
	}
	pgrp, err1 := strconv.Atoi(f[2])
	sid, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	utime, err4 := strconv.ParseUint(f[11], 10, 64)
	stime, err5 := strconv.ParseUint(f[12], 10, 64)
	rss, err6 := strconv.ParseInt(f[21], 10, 64)
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return Stat{}, fmt.Errorf("%w: %w", errMalformedStat, err)
	}
	return Stat{PID: pid, State: f[0][0], PGRP: pgrp, Session: sid, Start: start, CPUTicks: utime + stime, RSSPages: rss}, nil
}
