package state

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ProcStartTime reads a process's start time (field 22 of /proc/PID/stat,
// clock ticks since boot), which with the pid identifies the process: a
// reused pid has another start time.
func ProcStartTime(pid int) (uint64, error) {
	_, start, err := readStat(pid)
	return start, err
}

func readStat(pid int) (state byte, start uint64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("state: process %d: %w", pid, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return 0, 0, fmt.Errorf("state: process %d: %w", pid, err)
	}
	return parseStat(b)
}

// ParseStartTime takes the start time from the text of /proc/PID/stat.
// The command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so fields are counted after the last ')'.
func ParseStartTime(stat []byte) (uint64, error) {
	_, start, err := parseStat(stat)
	return start, err
}

// parseStat reads the state (field 3: R, S, D, Z, ...) and the start time
// (field 22) from the text of /proc/PID/stat.
func parseStat(stat []byte) (byte, uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("state: /proc stat without a command name: %w", ErrInvalid)
	}
	fields := bytes.Fields(stat[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, 0, fmt.Errorf("state: /proc stat has %d fields after the name, want at least 20: %w", len(fields), ErrInvalid)
	}
	v, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("state: /proc stat start time %.24q: %w", fields[19], ErrInvalid)
	}
	return fields[0][0], v, nil
}

// SameProcess says whether pid still is the process that started at
// start: false when it is gone, the pid was reused, or it has exited and
// only its zombie is left (a zombie holds no fds: its taps and vhost
// devices are closed, and its QMP socket does not answer).
func SameProcess(pid int, start uint64) bool {
	st, got, err := readStat(pid)
	return err == nil && got == start && st != 'Z' && st != 'X'
}

// NetNS is the inode of the calling thread's network namespace
// (/proc/thread-self/ns/net: a thread may have left the process's).
func NetNS() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("state: network namespace: %w", err)
	}
	return st.Ino, nil
}
