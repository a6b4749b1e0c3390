package app

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/jam-dev/jam/internal/domain"
)

// maxRuntimes resolves --max-runtimes: -1 (or any negative) is the machine's default.
func maxRuntimes(flag int) int {
	if flag >= 0 {
		return flag
	}
	return domain.DefaultMaxRuntimesHere(memoryBytes())
}

// memoryBytes is the machine's memory (MemTotal), 0 when it cannot be read.
func memoryBytes() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
