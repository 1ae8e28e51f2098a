package libvirtd

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dirs are the directories a system libvirtd and virtlogd write, each of
// which a test's daemon gets as an empty directory of its own. Debian's
// libvirt 9.0 is built with sysconfdir /etc, localstatedir /var and
// runstatedir /run, and every path its daemons and drivers write lies
// under one of these or under /run (a tmpfs of the test's own):
//
//   - /etc/libvirt: configuration, which the first start completes: the
//     secret driver makes secrets/, the storage driver storage/ and
//     storage/autostart/, the network driver qemu/networks/autostart/,
//     the nwfilter driver nwfilter/; the qemu driver writes qemu/ for
//     defined domains. secrets/ and storage/ do not exist on a machine
//     where no libvirtd ever ran (the packages ship hooks/, qemu/networks/,
//     nwfilter/ and the config files), and on a read-only root the secret
//     driver's mkdir fails libvirtd's start ("Driver state initialization
//     failed").
//   - /var/lib/libvirt: domains' state (qemu/), dnsmasq, images, swtpm.
//   - /var/cache/libvirt: QEMU capabilities (qemu/capabilities/).
//   - /var/log/libvirt: libvirtd's and QEMU's logs (qemu/NAME.log).
//
// The packages (libvirt-daemon-system) make all four, so they exist as
// mount points wherever libvirtd is installed. A private /etc/libvirt
// also means the machine's own configuration, domains, networks and
// secrets are neither read nor touched: the daemon runs on libvirt's
// defaults and Seed's qemu.conf.
var Dirs = []string{"/etc/libvirt", "/var/lib/libvirt", "/var/cache/libvirt", "/var/log/libvirt"}

// QEMUConf is a test daemon's qemu.conf: no cgroups (a test's private
// /sys has no cgroup mounts, and nothing is left in the machine's cgroup
// tree), no mount namespace for QEMU (libvirt would carry the test's
// mounts under /dev, the bind over /dev/kvm, into it and fails to), QEMU
// as libvirt-qemu as Debian's default.
const QEMUConf = `# netctl test/libvirtd
user = "libvirt-qemu"
group = "libvirt-qemu"
cgroup_controllers = [ ]
namespaces = [ ]
`

// Seed fills etc, the empty directory a test's daemon sees as
// /etc/libvirt, with what it reads there: QEMUConf as qemu.conf and an
// empty hook directory hooks/qemu.d. Everything else libvirt reads from
// /etc/libvirt is optional (its defaults apply).
func Seed(etc string) error {
	if err := os.MkdirAll(filepath.Join(etc, "hooks", "qemu.d"), 0o755); err != nil {
		return fmt.Errorf("libvirtd: %w", err)
	}
	if err := os.WriteFile(filepath.Join(etc, "qemu.conf"), []byte(QEMUConf), 0o600); err != nil {
		return fmt.Errorf("libvirtd: %w", err)
	}
	return nil
}
