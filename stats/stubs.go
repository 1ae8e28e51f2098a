package stats

import "context"

type ringState struct{}

type session struct{}

func (c *Collector) openSession(ctx context.Context, t Target) *session { return &session{} }
func (s *session) close()                                               {}

func (c *Collector) readRings(ctx context.Context, sess *session, s *NICStats) {
	s.missing(SourceRings, "not yet implemented in this build")
}
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
