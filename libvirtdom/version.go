package libvirtdom

import (
	"context"
	"fmt"
)

// HypervisorVersion is the version of the QEMU libvirt runs domains with
// (virConnectGetVersion: major*1000000 + minor*1000 + micro), as
// "7.2.0"; "" when libvirt does not say.
func (c *Conn) HypervisorVersion(ctx context.Context) (string, error) {
	var v uint64
	if err := c.do(ctx, "hypervisor version", func() (err error) { v, err = c.l.ConnectGetVersion(); return }); err != nil {
		return "", err
	}
	if v == 0 {
		return "", nil
	}
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000), nil
}
