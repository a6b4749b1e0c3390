package procgroup

import (
	"os"
	"time"
)

// ClockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Jam runs on (reading sysconf(_SC_CLK_TCK) would need cgo).
const ClockTicks = 100

// Usage is what a process group uses now: the sum over its live processes.
type Usage struct {
	Processes int
	// RSSBytes is the summed resident memory (shared pages count once per process, as the
	// kernel's per-process figure does: an upper bound, which is what a ceiling wants).
	RSSBytes int64
	// CPU is the total user and system time its live processes have used.
	CPU time.Duration
}

// GroupUsage measures each of the given process groups in one pass over /proc; a group with
// no live process is absent from the result.
func GroupUsage(sys System, pgids []int) (map[int]Usage, error) {
	want := make(map[int]bool, len(pgids))
	for _, g := range pgids {
		want[g] = true
	}
	procs, err := sys.Processes()
	if err != nil {
		return nil, err
	}
	page := int64(os.Getpagesize())
	out := map[int]Usage{}
	for _, p := range procs {
		if !want[p.PGRP] || p.Dead() {
			continue
		}
		u := out[p.PGRP]
		u.Processes++
		u.RSSBytes += p.RSSPages * page
		u.CPU += time.Duration(p.CPUTicks) * time.Second / ClockTicks
		out[p.PGRP] = u
	}
	return out, nil
}
