package migrate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"errors"
	"github.com/netctl/netctl/internal/errs"
)

// fakeDest serves a QMP monitor of a destination QEMU whose run state is
// status and whose query-migrate says mig (QEMU 9.1+ with
// migrate-incoming exit-on-error=false keeps a destination whose load
// failed, inmigrate, its query-migrate failed).
func fakeDest(t *testing.T, status, mig string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintln(c, `{"QMP": {"version": {"qemu": {"micro": 0, "minor": 1, "major": 9}, "package": ""}, "capabilities": []}}`)
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					var cmd struct {
						Execute string `json:"execute"`
					}
					json.Unmarshal(sc.Bytes(), &cmd)
					switch cmd.Execute {
					case "query-name":
						fmt.Fprintln(c, `{"return": {"name": "dst"}}`)
					case "qom-get":
						fmt.Fprintln(c, `{"return": "pc-i440fx-9.1-machine"}`)
					case "query-status":
						fmt.Fprintf(c, `{"return": {"status": %q, "running": false}}`+"\n", status)
					case "query-migrate":
						fmt.Fprintf(c, `{"return": {"status": %q, "error-desc": "load of migration failed: Invalid argument"}}`+"\n", mig)
					default:
						fmt.Fprintln(c, `{"return": {}}`)
					}
				}
			}()
		}
	}()
	return sock
}

// TestFinishIncomingFailed: finish on a destination whose incoming
// migration failed (it stays inmigrate when QEMU does not exit on the
// error) says so at once, with QEMU's reason and what to do (the guest
// is on the source: cont there), instead of waiting and telling to run
// migrate-incoming.
func TestFinishIncomingFailed(t *testing.T) {
	sock := fakeDest(t, "inmigrate", "failed")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Finish(ctx, FinishRequest{QMP: sock, StateDir: t.TempDir(), Wait: 3 * time.Second})
	if err == nil || !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "load of migration failed") || !strings.Contains(err.Error(), "cont") {
		t.Fatalf("finish of a failed destination: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("finish waited %s for a migration that had failed", d)
	}
}
