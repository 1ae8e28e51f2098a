package stats

import (
	"bytes"
	"fmt"
	"strconv"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat.
// Linux fixes it at 100 for /proc on every architecture netctl builds
// for (amd64, arm64), whatever CONFIG_HZ is; sysconf(_SC_CLK_TCK) would
// say so too, but needs cgo.
const clockTicks = 100

// maxStat bounds a /proc/PID/stat line (about 300 bytes; comm is at most
// 64 bytes).
const maxStat = 4096

// taskStat is the part of /proc/PID/task/TID/stat stats reads.
type taskStat struct {
	Comm         string
	State        byte // R, S, D, Z (exited, not yet reaped), ...
	PPID         int
	UTime, STime uint64 // clock ticks
	StartTime    uint64 // clock ticks after boot
}

// CPUSeconds is utime+stime in seconds.
func (s taskStat) CPUSeconds() float64 { return float64(s.UTime+s.STime) / clockTicks }

// parseStat reads /proc/PID/stat's text (untrusted, bounded): comm is
// between the first '(' and the LAST ')' (a comm may hold ')' and
// spaces); after it, field 3 is the state, 4 ppid, 14 utime, 15 stime,
// 22 starttime.
func parseStat(b []byte) (taskStat, error) {
	var s taskStat
	if len(b) > maxStat {
		return s, fmt.Errorf("stat: %d bytes, more than %d: %w", len(b), maxStat, ErrInvalid)
	}
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return s, fmt.Errorf("stat: no (comm): %w", ErrInvalid)
	}
	s.Comm = string(b[open+1 : close])
	f := bytes.Fields(b[close+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 22-3+1 {
		return s, fmt.Errorf("stat: %d fields after comm, want at least 20: %w", len(f), ErrInvalid)
	}
	s.State = f[0][0]
	num := func(n int) (uint64, error) {
		v, err := strconv.ParseUint(string(f[n-3]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: field %d %q: %w", n, f[n-3], ErrInvalid)
		}
		return v, nil
	}
	ppid, err := num(4)
	if err != nil {
		return s, err
	}
	if ppid > 1<<22 {
		return s, fmt.Errorf("stat: ppid %d out of range: %w", ppid, ErrInvalid)
	}
	s.PPID = int(ppid)
	if s.UTime, err = num(14); err != nil {
		return s, err
	}
	if s.STime, err = num(15); err != nil {
		return s, err
	}
	if s.StartTime, err = num(22); err != nil {
		return s, err
	}
	return s, nil
}
