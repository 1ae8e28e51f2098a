package vhostuser

import "fmt"

// fmtSscanf reads the address range at the start of a /proc/self/maps line.
func fmtSscanf(line string, lo, hi *uint64) (int, error) {
	return fmt.Sscanf(line, "%x-%x", lo, hi)
}
