package cni

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/internal/errs"
)

// TestArgsMAC: CNI_ARGS' MAC is read, other keys are the runtime's, and
// a bad MAC is a CNI error naming CNI_ARGS.
func TestArgsMAC(t *testing.T) {
	m, err := argsMAC("IgnoreUnknown=1;K8S_POD_NAME=p;MAC=02:00:00:00:00:09")
	if err != nil || m.String() != "02:00:00:00:00:09" {
		t.Errorf("MAC: %v %v", m, err)
	}
	if m, err := argsMAC("K8S_POD_NAME=p"); err != nil || m != nil {
		t.Errorf("no MAC: %v %v", m, err)
	}
	for _, bad := range []string{"MAC=zz", "MAC=01:00:5e:00:00:01", "MAC=", strings.Repeat("x", 70000)} {
		_, err := argsMAC(bad)
		var te *types.Error
		if !errors.As(err, &te) || te.Code != types.ErrInvalidEnvironmentVariables || te.Details != "CNI_ARGS" {
			t.Errorf("%.20s: %v", bad, err)
		}
	}
}

// TestCNIErrCodes: netctl's errors become CNI codes by kind.
func TestCNIErrCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		code uint
	}{
		{fmt.Errorf("x: %w", errs.ErrConflict), CodeConflict},
		{fmt.Errorf("x: %w", errs.ErrNotAvailable), CodeNotAvailable},
		{fmt.Errorf("x: %w", errs.ErrNotSupported), CodeNotAvailable},
		{fmt.Errorf("x: %w", errs.ErrInvalid), types.ErrInvalidNetworkConfig},
		{fmt.Errorf("x: %w", errNetNSGone), types.ErrInvalidNetNS},
		{fmt.Errorf("x: %w", errNotNetNS), types.ErrInvalidNetNS},
		{&ConfigError{Code: 2, Msg: "m"}, 2},
		{errors.New("other"), types.ErrInternal},
	} {
		var te *types.Error
		if e := cniErr(c.err); !errors.As(e, &te) || te.Code != c.code || te.Msg == "" {
			t.Errorf("%v: %v, want code %d", c.err, e, c.code)
		}
	}
	if cniErr(nil) != nil {
		t.Error("cniErr(nil) is not nil")
	}
}

// TestVDPAName: netctl's prefix, a valid vdpa name, stable, one per
// container and interface.
func TestVDPAName(t *testing.T) {
	a, b := vdpaName("c1", "net1"), vdpaName("c1", "net2")
	if a == b || a != vdpaName("c1", "net1") || !strings.HasPrefix(a, hostnic.VDPAPrefix) || !hostnic.ValidVDPAName(a) || vdpaName("c1n", "et1") == a {
		t.Errorf("vdpaName: %q %q", a, b)
	}
}
