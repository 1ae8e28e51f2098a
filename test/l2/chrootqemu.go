package l2

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netctl/netctl/qmp"
)

// ChrootQEMU is a paused QEMU 7.2 that the VM runs from the host's files
// (chrooted in Root, as Chroot prepares it): q35 with one root port (rp1)
// and 256 MiB of RAM, no guest, a QMP socket under Root/run/l2.
type ChrootQEMU struct {
	Name string // -name, and the socket's base name
	// NativeHotplug turns q35's ACPI hotplug off for the root ports, so
	// that a slot the guest never powered unplugs at once.
	NativeHotplug bool
	// SharedRAM makes the RAM a shared memfd (what a VDUSE device needs).
	SharedRAM bool
	Extra     []string // more QEMU arguments
}

// ChrootProc is a running ChrootQEMU.
type ChrootProc struct {
	Sock string // the QMP socket as the VM (L1) sees it
	PID  int
	cmd  *exec.Cmd
	out  *strings.Builder
	once sync.Once
}

// Stop kills QEMU and waits for it (once; later calls do nothing).
func (p *ChrootProc) Stop() {
	p.once.Do(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
}

// Stderr is what QEMU wrote to stderr so far; read it after Stop.
func (p *ChrootProc) Stderr() string { return p.out.String() }

// StartChrootQEMU starts q and waits (within ctx) until its QMP socket
// answers; the caller stops it.
func StartChrootQEMU(ctx context.Context, q ChrootQEMU) (*ChrootProc, error) {
	if err := Chroot(); err != nil {
		return nil, err
	}
	sock := "/run/l2/" + q.Name + ".sock"
	os.MkdirAll(Root+"/run/l2", 0o755)
	os.Remove(Root + sock)
	args := []string{"/usr/bin/qemu-system-x86_64", "-S", "-nodefaults", "-display", "none", "-m", "256", "-machine", "q35"}
	if q.NativeHotplug {
		args = append(args, "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off")
	}
	args = append(args, "-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1", "-name", q.Name,
		"-qmp", "unix:"+sock+",server=on,wait=off")
	if q.SharedRAM {
		args = append(args, "-object", "memory-backend-memfd,id=mem,size=256M,share=on", "-machine", "memory-backend=mem")
	}
	p := &ChrootProc{Sock: Root + sock, out: &strings.Builder{}}
	p.cmd = exec.Command("chroot", append(append([]string{Root}, args...), q.Extra...)...)
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	for {
		c, err := qmp.Dial(ctx, p.Sock)
		if err == nil {
			p.PID, err = c.PeerPID()
			c.Close()
			if err != nil {
				p.Stop()
				return nil, err
			}
			return p, nil
		}
		if ctx.Err() != nil {
			p.Stop()
			return nil, fmt.Errorf("QEMU's QMP socket never answered: %v (stderr %s)", err, p.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartChrootQEMUForTest starts q (StartChrootQEMU, within a minute) for
// the test t: QEMU is stopped when t ends, and its stderr logged if t
// failed. Stop may be called before that.
func StartChrootQEMUForTest(t testing.TB, q ChrootQEMU) *ChrootProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := StartChrootQEMU(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("QEMU's stderr: %s", p.Stderr())
		}
	})
	return p
}
