package stats

import "context"

func (c *Collector) readWorkers(s *NICStats) {
	if s.Target.Backend == "vhost-net" {
		s.missing(SourceVhost, "not yet implemented in this build")
	}
}

func (c *Collector) readVDPA(ctx context.Context, s *NICStats) {
	if s.Target.Backend == "vdpa" {
		s.missing(SourceVDPA, "not yet implemented in this build")
	}
}
