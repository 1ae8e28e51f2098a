package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// TestInstallHookKeepsOthersScript: qemu.d/50-netctl that is not a
// netctl hook script (an operator's own, under the name) is not
// replaced: install refuses with what to do and leaves it as it was,
// and the operator's /etc/libvirt/hooks/qemu dispatcher is never
// touched. A netctl script for another binary is replaced (a moved
// netctl), an identical one left as is.
func TestInstallHookKeepsOthersScript(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	qemu := filepath.Join(dir, "qemu")
	os.WriteFile(qemu, []byte("#!/bin/sh\n/usr/local/bin/site-hook \"$@\"\n"), 0o755)
	qd := filepath.Join(dir, "qemu.d")
	os.Mkdir(qd, 0o755)
	p := filepath.Join(qd, hookScriptName)
	theirs := "#!/bin/sh\n# site's own hook\nexit 0\n"
	os.WriteFile(p, []byte(theirs), 0o755)

	if _, _, err := installHook(dir, bin); !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "not netctl's") {
		t.Errorf("install over another script: %v; want a refusal wrapping ErrConflict", err)
	}
	if b, _ := os.ReadFile(p); string(b) != theirs {
		t.Errorf("%s now holds %q", p, b)
	}

	os.WriteFile(p, []byte(hookScript("/opt/old/netctl")), 0o755)
	if _, changed, err := installHook(dir, bin); err != nil || !changed {
		t.Errorf("install over netctl's script for another binary: changed %v, %v", changed, err)
	}
	if _, changed, err := installHook(dir, bin); err != nil || changed {
		t.Errorf("second install: changed %v, %v", changed, err)
	}
	if b, _ := os.ReadFile(qemu); string(b) != "#!/bin/sh\n/usr/local/bin/site-hook \"$@\"\n" {
		t.Errorf("the qemu dispatcher now holds %q", b)
	}
	if ents, _ := os.ReadDir(qd); len(ents) != 1 {
		t.Errorf("qemu.d holds %v; want only %s", ents, hookScriptName)
	}
}
