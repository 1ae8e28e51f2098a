package macvtap

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// probeOffloads finds which offload combinations set accepts: all at once,
// else each feature with CSUM on its own. It then sets restore again.
func probeOffloads(set func(Offloads) error, restore Offloads) (Offloads, error) {
	defer set(restore)
	if err := set(OffloadAll); err == nil {
		return OffloadAll, nil
	} else if !errors.Is(err, unix.EINVAL) {
		return 0, err
	}
	var ok Offloads
	for _, o := range []Offloads{OffloadCSUM, OffloadCSUM | OffloadTSO4, OffloadCSUM | OffloadTSO6,
		OffloadCSUM | OffloadTSO4 | OffloadTSOECN, OffloadCSUM | OffloadUFO, OffloadCSUM | OffloadUSO4 | OffloadUSO6} {
		if err := set(o); err == nil {
			ok |= o
		} else if !errors.Is(err, unix.EINVAL) {
			return ok, err
		}
	}
	return ok, nil
}

// offloadError explains an EINVAL from TUNSETOFFLOAD: which rule o breaks,
// or that this kernel lacks a flag (USO came in Linux 6.2).
func offloadError(o Offloads, err error) error {
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	switch {
	case o&^OffloadCSUM != 0 && o&OffloadCSUM == 0:
		return fmt.Errorf("offloads %v: every offload needs csum: %w", o, err)
	case (o&OffloadUSO4 != 0) != (o&OffloadUSO6 != 0):
		return fmt.Errorf("offloads %v: uso4 and uso6 go together: %w", o, err)
	case o&OffloadTSOECN != 0 && o&(OffloadTSO4|OffloadTSO6) == 0:
		return fmt.Errorf("offloads %v: tso_ecn needs tso4 or tso6: %w", o, err)
	case o&(OffloadUSO4|OffloadUSO6) != 0:
		return fmt.Errorf("offloads %v: this kernel's tun refuses uso4/uso6, which came in Linux 6.2 (UDP segmentation offload): %w", o, err)
	}
	return fmt.Errorf("offloads %v: refused by this kernel: %w", o, err)
}
