package zerocopy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netctl/netctl/macvtap"
)

func TestReadStates(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "experimental_zcopytx")
	s, err := readFrom(p)
	if err != nil || s.Loaded || s.Enabled || !strings.Contains(s.Advice, "not loaded") || s.Threshold != 256 {
		t.Errorf("missing module: %+v, %v", s, err)
	}
	os.WriteFile(p, []byte("0\n"), 0o644)
	s, _ = readFrom(p)
	if !s.Loaded || s.Enabled || !strings.Contains(s.Advice, ModprobeConf) || !strings.Contains(s.Advice, "modprobe -r vhost_net") {
		t.Errorf("off: %+v", s)
	}
	os.WriteFile(p, []byte("1\n"), 0o644)
	if s, _ = readFrom(p); !s.Enabled || s.Advice != "" {
		t.Errorf("on: %+v", s)
	}
}

func TestCheck(t *testing.T) {
	good := &macvtap.DeviceFeatures{Device: "eth0", Active: map[string]bool{"tx-scatter-gather": true, "highdma": true}}
	bad := &macvtap.DeviceFeatures{Device: "eth1", Active: map[string]bool{"tx-scatter-gather": true}}
	for _, c := range []struct {
		kind  macvtap.Kind
		lower *macvtap.DeviceFeatures
		ok    bool
		why   string
	}{
		{macvtap.KindTap, nil, true, "SOCK_ZEROCOPY"},
		{macvtap.KindMacvtap, good, true, "eth0 does scatter-gather"},
		{macvtap.KindMacvtap, bad, false, "eth1 lacks highdma"},
		{macvtap.KindMacvtap, nil, false, "not read"},
		{macvtap.KindPacket, nil, false, "copies every frame"},
	} {
		e := Check(c.kind, c.lower)
		if e.Eligible != c.ok || !strings.Contains(e.Reason, c.why) {
			t.Errorf("%s: %+v", c.kind, e)
		}
	}
}
