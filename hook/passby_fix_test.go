package hook

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/netctl/netctl/state"
)

// TestReviewBrokenConfigPassesTextMentions: with a host config that does
// not load, a domain that only mentions netctl (its namespace URI in the
// text of another namespace's metadata, in a CDATA section, in its
// description, an empty <netctl:hook/> that lists no interface, a path
// under netctl's vdpa directory that is no vdpa interface of netctl's)
// asks netctl to manage nothing and must pass every operation. Before
// the fix prepare refused each of them with the config's error.
func TestReviewBrokenConfigPassesTextMentions(t *testing.T) {
	const dom = `<domain type='kvm'><name>%NAME%</name><memory>1024</memory>%EXTRA%
  <devices>
    <interface type='network'><mac address='52:54:00:00:00:01'/><source network='default'/></interface>%DEV%
  </devices></domain>`
	cases := map[string][2]string{
		"quoter":    {`<metadata><doc:note xmlns:doc="urn:example:doc">netctl's namespace is http://netctl.dev/xmlns/hook/1</doc:note></metadata>`, ""},
		"cdata":     {`<metadata><doc:note xmlns:doc="urn:example:doc"><![CDATA[<netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1"><netctl:interface mac="52:54:00:00:00:01"/></netctl:hook>]]></doc:note></metadata>`, ""},
		"described": {`<description>uses http://netctl.dev/xmlns/hook/1 on other hosts</description>`, ""},
		"comment":   {`<!-- netctl: http://netctl.dev/xmlns/hook/1 -->`, ""},
		"emptyhook": {`<metadata><netctl:hook xmlns:netctl="http://netctl.dev/xmlns/hook/1"/></metadata>`, ""},
		"diskpath":  {"", `<disk type='file' device='disk'><source file='/run/netctl/vdpa/notes.img'/><target dev='vda'/></disk>`},
		"vdpasub":   {"", `<interface type='vdpa'><source dev='/run/netctl/vdpa/sub/dev0'/></interface>`},
	}
	for name, c := range cases {
		x := strings.NewReplacer("%NAME%", name, "%EXTRA%", c[0], "%DEV%", c[1]).Replace(dom)
		t.Run(name, func(t *testing.T) { checkPassedBy(t, name, []byte(x)) })
	}
}

// TestReviewKeyTwinPassesRelease: libvirt allows a domain named like
// the key state.VMKey gives another domain's name ("x-" and 32 hex
// digits). Such a name is hashed too now, so the two never share a record
// file or lock; the twin, which netctl manages nothing in, passes release
// and started at once, and the other domain's record stays. Before the
// hook's name check release failed ("the record for domain ... is domain
// ...'s") after taking the other domain's lock, and started waited for
// that lock; before VMKey hashed "x-" names they shared the file.
func TestReviewKeyTwinPassesRelease(t *testing.T) {
	f := newFake(t)
	h, log, vd := newTestHook(t, f)
	ctx := context.Background()
	x := bytes.ReplaceAll(allXML(t, vd), []byte("<name>netctl-all</name>"), []byte("<name>web 1</name>"))
	if _, err := h.Run(ctx, "web 1", "prepare", "begin", bytes.NewReader(x)); err != nil {
		t.Fatal(err)
	}
	twin := state.VMKey("web 1")
	if !strings.HasPrefix(twin, "x-") || state.VMKey(twin) == twin {
		t.Fatalf("domain %q's key is %q: the twin shares web 1's record and lock", twin, state.VMKey(twin))
	}
	l, err := h.Store.Lock(ctx, state.DomainLockKey("web 1")) // web 1's hook call in progress
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, op := range [][2]string{{"started", "begin"}, {"release", "end"}} {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := h.Run(rctx, twin, op[0], op[1], nil)
		cancel()
		if err != nil || (res != nil && len(res.Notes)+len(res.Done) > 0) {
			t.Errorf("%s of domain %s (netctl manages nothing in it): %+v %v\nlog:\n%s", op[0], twin, res, err, log)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the twin's started and release waited %s for another domain's lock", d)
	}
	l.Unlock()
	if rec, err := h.Store.LoadDomain("web 1"); err != nil || rec.Name != "web 1" || len(rec.Taps) != 1 {
		t.Errorf("web 1's record after the twin's calls: %+v %v", rec, err)
	}
}
