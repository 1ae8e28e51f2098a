package probe

import (
	"github.com/netctl/netctl/macvtap"
)

// probeScratch finds the offloads a tap and a macvtap take by trial.
// macvtap.ProbeOffloads does each trial on a scratch device of its own in
// a throwaway network and mount namespace: nothing is ever made, changed
// or mounted in the caller's namespaces, and a macvtap's device node never
// goes in the host's /dev. What fails is reported in r.Tap.Error or
// r.Macvtap.Error (as non-root: the namespace needs CAP_SYS_ADMIN).
func probeScratch(r *Result, withTap, withMacvtap bool) {
	if !withTap {
		// known already (Parts.Tap)
	} else if o, err := macvtap.ProbeOffloads(macvtap.KindTap); err != nil {
		r.Tap.Error = "not probed: " + err.Error()
	} else {
		r.Tap.Available, r.Tap.Offloads = true, o.Names()
	}
	if !withMacvtap {
		return
	}
	if o, err := macvtap.ProbeOffloads(macvtap.KindMacvtap); err != nil {
		r.Macvtap.Error = "not probed: " + err.Error()
	} else {
		r.Macvtap.Available, r.Macvtap.Offloads = true, o.Names()
	}
}
