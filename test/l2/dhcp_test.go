package l2

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/netctl/netctl/internal/fuzzalloc"
)

// The real frames are iPXE's (Debian's ipxe-qemu efi-virtio.rom under
// QEMU 7.2), caught by TestHostFirmwareDHCP with NETCTL_DHCP_SAMPLES.
func readSample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseDHCPReal(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0x0f, 0x01}
	for name, want := range map[string]DHCPType{"ipxe-dhcpdiscover.bin": DHCPDiscover, "ipxe-dhcprequest.bin": DHCPRequest} {
		m, err := ParseDHCP(readSample(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.Type != want || !bytes.Equal(m.Client, mac) || !bytes.Equal(m.Source, mac) {
			t.Errorf("%s: %+v, want %v from %s", name, m, want, mac)
		}
	}
}

// TestDHCPReplyParses: a reply is a well-formed IPv4/UDP frame to port
// 68 whose BOOTP part carries the request's xid, chaddr and the type.
func TestDHCPReplyParses(t *testing.T) {
	req, err := ParseDHCP(readSample(t, "ipxe-dhcpdiscover.bin"))
	if err != nil {
		t.Fatal(err)
	}
	f := DHCPReply(req, DHCPOffer, DHCPServerMAC, DHCPServerIP, DHCPOfferIP)
	if ipChecksum(f[ethHdr:ethHdr+20]) != 0 {
		t.Errorf("IPv4 header checksum does not verify")
	}
	// Turn it into a request to reuse the parser: port 67, op 1.
	g := append([]byte(nil), f...)
	g[ethHdr+20+3] = bootpServer
	g[ethHdr+28] = 1
	m, err := ParseDHCP(g)
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != DHCPOffer || m.XID != req.XID || !bytes.Equal(m.Client, req.Client) || !bytes.Equal(m.Source, DHCPServerMAC) {
		t.Errorf("reply parsed as %+v, request %+v", m, req)
	}
}

func TestParseDHCPRejects(t *testing.T) {
	good := readSample(t, "ipxe-dhcpdiscover.bin")
	for name, mut := range map[string]func([]byte) []byte{
		"short":        func(b []byte) []byte { return b[:40] },
		"ipv6":         func(b []byte) []byte { b[12], b[13] = 0x86, 0xdd; return b },
		"tcp":          func(b []byte) []byte { b[ethHdr+9] = 6; return b },
		"port 53":      func(b []byte) []byte { b[ethHdr+20+3] = 53; return b },
		"no cookie":    func(b []byte) []byte { b[ethHdr+28+bootpFixed] = 0; return b },
		"reply op":     func(b []byte) []byte { b[ethHdr+28] = 2; return b },
		"udp too long": func(b []byte) []byte { b[ethHdr+20+4] = 0xff; return b },
		"truncated":    func(b []byte) []byte { return b[:ethHdr+28+bootpFixed+6] },
	} {
		if _, err := ParseDHCP(mut(append([]byte(nil), good...))); !errors.Is(err, errNotDHCP) {
			t.Errorf("%s: %v, want errNotDHCP", name, err)
		}
	}
}

// FuzzParseDHCP: frames from the wire never panic the parser, and what it
// accepts has a type and a 6-byte client address.
func FuzzParseDHCP(f *testing.F) {
	f.Add(readSample(f, "ipxe-dhcpdiscover.bin"))
	f.Add(readSample(f, "ipxe-dhcprequest.bin"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m DHCPMessage
		var err error
		fuzzalloc.Check(t, len(b), func() { m, err = ParseDHCP(b) })
		if err == nil && (m.Type == 0 || len(m.Client) != 6) {
			t.Fatalf("accepted %+v", m)
		}
	})
}
