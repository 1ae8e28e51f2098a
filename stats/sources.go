package stats

import (
	"context"
	"errors"
	"fmt"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/vdpa"
)

// readVDPA fills s.VDPA for a vdpa NIC: each data queue's vendor
// statistics (like `vdpa dev vstats show DEV qidx N`: received_desc and
// completed_desc on mlx5_vdpa, the one parent driver that has them).
// Queue 2*i is pair i's rx, 2*i+1 its tx.
func (c *Collector) readVDPA(ctx context.Context, s *NICStats) {
	t := s.Target
	if t.Backend != policy.BackendVDPA {
		return
	}
	if t.VDPA == "" {
		s.missing(SourceVDPA, "the NIC's vdpa device is not known")
		return
	}
	cl, err := vdpa.Dial(ctx)
	if err != nil {
		s.missing(SourceVDPA, err.Error())
		return
	}
	defer cl.Close()
	pairs := max(t.QueuePairs, 1)
	for q := 0; q < 2*pairs; q++ {
		_, vs, err := cl.VStats(ctx, t.VDPA, uint32(q))
		if err != nil {
			if errors.Is(err, vdpa.ErrNotSupported) {
				driver := "unknown driver"
				if d, derr := cl.Device(ctx, t.VDPA); derr == nil {
					driver = d.MgmtDev
				}
				s.missing(SourceVDPA, fmt.Sprintf("not provided by this driver (%s)", driver))
			} else {
				s.missing(SourceVDPA, err.Error())
			}
			s.VDPA = nil
			return
		}
		s.VDPA = append(s.VDPA, vdpaQueue(q, vs))
	}
	s.VDPATime = c.o.Now()
}

// vdpaQueue picks the descriptor counters out of a queue's vendor
// statistics.
func vdpaQueue(q int, vs []vdpa.VendorStat) VDPAQueueStats {
	v := VDPAQueueStats{Queue: q, Type: "rx"}
	if q%2 == 1 {
		v.Type = "tx"
	}
	for _, st := range vs {
		switch st.Name {
		case "received_desc":
			v.ReceivedDesc = st.Value
		case "completed_desc":
			v.CompletedDesc = st.Value
		}
	}
	return v
}
