package zerocopy

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/netctl/netctl/macvtap"
)

// ParamPath is the module parameter that switches zero-copy TX.
const ParamPath = "/sys/module/vhost_net/parameters/experimental_zcopytx"

// GoodCopyLen is the frame size below which vhost-net copies anyway
// (VHOST_GOODCOPY_LEN, drivers/vhost/net.c).
const GoodCopyLen = 256

// ModprobeConf is the line that turns zero-copy TX on at the next load.
const ModprobeConf = "options vhost_net experimental_zcopytx=1"

// Status is vhost-net's zero-copy TX state on this host.
type Status struct {
	Loaded    bool   `json:"loaded"`    // the vhost_net module is loaded
	Enabled   bool   `json:"enabled"`   // experimental_zcopytx is on
	Threshold int    `json:"threshold"` // frames shorter than this are copied anyway
	Advice    string `json:"advice,omitempty"`
}

// Read reports the state from sysfs.
func Read() (Status, error) { return readFrom(ParamPath) }

func readFrom(path string) (Status, error) {
	s := Status{Threshold: GoodCopyLen}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.Advice = "vhost_net is not loaded: to have zero-copy TX when it loads, put '" + ModprobeConf +
			"' in /etc/modprobe.d/vhost-net.conf"
		return s, nil
	case err != nil:
		return s, fmt.Errorf("zerocopy: %w", err)
	}
	s.Loaded = true
	v := strings.TrimSpace(string(b))
	s.Enabled = v != "0" && v != "N" && v != ""
	if !s.Enabled {
		s.Advice = "zero-copy TX is off (vhost_net experimental_zcopytx=0, read-only while loaded): put '" + ModprobeConf +
			"' in /etc/modprobe.d/vhost-net.conf, stop every VM using vhost-net, then modprobe -r vhost_net && modprobe vhost_net"
	}
	return s, nil
}

// Eligibility says whether frames sent through a backend can go out
// without a copy.
type Eligibility struct {
	Kind     macvtap.Kind `json:"kind"`
	Eligible bool         `json:"eligible"`
	Reason   string       `json:"reason"`
}

// Check tells whether a backend kind qualifies. For a macvtap, lower is the
// lower device's features (macvtap.ReadFeatures): the kernel enables
// zero-copy only when it does scatter-gather and high DMA.
func Check(kind macvtap.Kind, lower *macvtap.DeviceFeatures) Eligibility {
	e := Eligibility{Kind: kind}
	switch kind {
	case macvtap.KindTap:
		e.Eligible, e.Reason = true, "tun marks every queue SOCK_ZEROCOPY"
	case macvtap.KindMacvtap:
		switch {
		case lower == nil:
			e.Reason = "unknown: the lower device's features were not read"
		case !lower.Active["tx-scatter-gather"] || !lower.Active["highdma"]:
			var miss []string
			for _, f := range []string{"tx-scatter-gather", "highdma"} {
				if !lower.Active[f] {
					miss = append(miss, f)
				}
			}
			e.Reason = fmt.Sprintf("the lower device %s lacks %s, so macvtap does not mark its queues SOCK_ZEROCOPY",
				lower.Device, strings.Join(miss, " and "))
		default:
			e.Eligible, e.Reason = true, fmt.Sprintf("the lower device %s does scatter-gather and high DMA", lower.Device)
		}
	case macvtap.KindPacket:
		e.Reason = "packet sockets are not SOCK_ZEROCOPY: vhost-net copies every frame"
	default:
		e.Reason = "unknown backend kind"
	}
	return e
}
