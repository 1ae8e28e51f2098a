package hook

import (
	"errors"
	"strings"
	"testing"

	"github.com/netctl/netctl/internal/errs"
)

// TestParsePlanRefusesSharedListedMAC: netctl's metadata names an
// interface by MAC, so two interfaces with that MAC (spelled in either
// case) make it ambiguous which one the entry means, and would give two
// devices one MAC: refused, naming the MAC. Two interfaces netctl does
// not manage may share a MAC (libvirt's business).
func TestParsePlanRefusesSharedListedMAC(t *testing.T) {
	dom := func(meta string) []byte {
		return []byte(`<domain type='qemu'><name>dup</name>
  <metadata>` + meta + `</metadata>
  <devices>
    <interface type='ethernet'><mac address='52:54:00:aa:00:01'/><target dev='dup0' managed='no'/></interface>
    <interface type='ethernet'><mac address='52:54:00:AA:00:01'/><target dev='dup1' managed='no'/></interface>
  </devices></domain>`)
	}
	_, err := ParsePlan(dom(`<netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1"><netctl:interface mac="52:54:00:aa:00:01"/></netctl:hook>`), DefaultConfig())
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "52:54:00:aa:00:01") {
		t.Errorf("two interfaces with the listed MAC: %v; want a refusal naming it", err)
	}
	p, err := ParsePlan(dom(""), DefaultConfig())
	if err != nil || len(p.Interfaces) != 0 {
		t.Errorf("two unmanaged interfaces with one MAC: %+v, %v", p, err)
	}
}
