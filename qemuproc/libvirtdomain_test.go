package qemuproc

import "testing"

// TestOfLibvirtDomain: a libvirt domain's QEMU is the one whose monitor
// is libvirt's and whose -uuid is the domain's; a same-named QEMU of
// another libvirtd (another UUID) or a hand-run one is not. Before, stats
// and diagnose took any libvirt-monitored QEMU of that name.
func TestOfLibvirtDomain(t *testing.T) {
	const uuid = "6a4f3b1e-0d2c-4e8f-9a7b-5c6d7e8f9a0b"
	argv := func(u string) []string {
		a := []string{"/usr/bin/qemu-system-x86_64", "-name", "guest=web1,debug-threads=on",
			"-chardev", "socket,id=charmonitor,fd=30,server=on,wait=off", "-mon", "chardev=charmonitor,id=monitor,mode=control"}
		if u != "" {
			a = append(a, "-uuid", u)
		}
		return a
	}
	for _, c := range []struct {
		name string
		argv []string
		want bool
	}{
		{"the domain's QEMU", argv(uuid), true},
		{"upper-case -uuid", argv("6A4F3B1E-0D2C-4E8F-9A7B-5C6D7E8F9A0B"), true},
		{"another libvirtd's domain of that name", argv("11111111-2222-3333-4444-555555555555"), false},
		{"no -uuid", argv(""), false},
		{"hand-run, same uuid", []string{"/usr/bin/qemu-system-x86_64", "-name", "web1", "-uuid", uuid, "-qmp", "unix:/tmp/q.sock,server=on,wait=off"}, false},
	} {
		cl, err := ParseCmdline(c.argv)
		if err != nil {
			t.Fatal(err)
		}
		v := VM{Name: cl.Name, UUID: cl.UUID, Monitors: cl.Monitors}
		if got := v.OfLibvirtDomain(uuid); got != c.want {
			t.Errorf("%s: %v (monitors %+v, uuid %q), want %v", c.name, got, cl.Monitors, cl.UUID, c.want)
		}
	}
}
