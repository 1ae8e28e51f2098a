// Package prom runs a real Prometheus server (Debian's prometheus) and
// netctl exporter for host tests, and reads what they serve. It is
// test-only: every call takes a testing.TB and fails the test on error.
//
// Namespaces. Call NewHTTP, Start and StartExporter from the test
// goroutine after testenv.Host: the processes are children of the test's
// thread, so they run in the test's network and mount namespaces, and
// HTTP carries the requests to them from that network namespace (net/http
// dials on goroutines of its own, whose threads would be in the
// machine's). DialIn is that dialing for a program's own http.Client
// (test/bench/stats).
//
// Lifecycle. Prometheus and the exporter are stopped when the test ends
// (t.Cleanup: SIGTERM for Prometheus; the exporter's Stop, which checks
// that it exited 0, unless the test stopped it or it exited by itself).
package prom
