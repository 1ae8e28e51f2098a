// Package qemutest starts real QEMUs for host tests and reads what they
// hold over QMP. It is test-only: every call takes a *testing.T and fails
// the test on error.
//
// Lifecycle: call Start or StartPaused from the test goroutine after
// testenv.Host, so that QEMU runs in the test's network and mount
// namespaces (a child inherits the namespaces of the thread that forks
// it). QEMU is killed and reaped when the test ends (t.Cleanup); a test
// that kills it earlier may Wait on the returned *exec.Cmd itself. QEMU's
// stderr goes to a file in the test's temporary directory and is logged
// when it is not empty; the parent holds no fd of it after Start, so
// tests that count their process's fds see only os/exec's own.
//
// State and Read say what a QEMU holds that a NIC's attach could leave:
// user-created devices, network clients and fd sets. QEMU's monitor takes
// one client at a time, so Read dials, reads and hangs up.
package qemutest
