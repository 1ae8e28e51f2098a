package stats

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// init makes this test binary a stand-in QEMU that tests start as
// their target process, before any test runs, by NETCTL_TEST_SLEEPER:
//   - "1": sleep (TestVMProcErr);
//   - "nodump": ask not to be read (prctl PR_SET_DUMPABLE 0, as ssh-agent
//     does), print "ready", sleep (TestHostReadRefusesNonDumpable);
//   - "setid": take real uid and gid nobody and effective uid root (what a
//     setuid-root program run by nobody has) and exec the program named
//     by NETCTL_TEST_EXEC as qemu-system-x86_64 300
//     (TestHostReadRefusesSetuidExec).
func init() {
	switch os.Getenv("NETCTL_TEST_SLEEPER") {
	case "1":
		time.Sleep(120 * time.Second)
		os.Exit(0)
	case "nodump":
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			fmt.Println("prctl:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		time.Sleep(300 * time.Second)
		os.Exit(0)
	case "setid":
		err := syscall.Setgroups(nil)
		if err == nil {
			err = syscall.Setresgid(65534, 65534, 65534)
		}
		if err == nil {
			err = syscall.Setresuid(65534, 0, 0)
		}
		if err == nil {
			err = syscall.Exec(os.Getenv("NETCTL_TEST_EXEC"), []string{"qemu-system-x86_64", "300"}, nil)
		}
		fmt.Println("setid:", err)
		os.Exit(1)
	}
}
