// Command gonoop is the Go counterpart of test/bench/cnoop/noop.c: it
// reads its stdin and exits 0. startup-bench times it beside netctl to
// show the floor any Go program pays on the machine measured (the Go
// runtime's start and exit), apart from what netctl adds to it.
package main

import "os"

func main() {
	var buf [4096]byte
	for {
		if n, err := os.Stdin.Read(buf[:]); n == 0 || err != nil {
			return
		}
	}
}
