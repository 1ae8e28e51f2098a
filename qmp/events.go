package qmp

// The event queue is bounded both in count and in bytes: QEMU sends events
// whenever it likes, and a client that only ever runs commands and never
// calls Events must not grow without bound. When either bound is reached
// the oldest events are dropped and counted.
const (
	MaxEvents     = 1024    // events kept until Events is called
	MaxEventBytes = 1 << 20 // bytes of event data kept until Events is called
)

// eventQueue is the bounded queue; the Client's mu guards it.
type eventQueue struct {
	ev      []Event
	bytes   int
	dropped uint64
}

func (q *eventQueue) push(e Event) {
	q.ev = append(q.ev, e)
	q.bytes += eventSize(e)
	n := 0
	for len(q.ev)-n > MaxEvents || (q.bytes > MaxEventBytes && len(q.ev)-n > 0) {
		q.bytes -= eventSize(q.ev[n])
		q.ev[n] = Event{}
		n++
	}
	if n > 0 {
		q.dropped += uint64(n)
		q.ev = append([]Event(nil), q.ev[n:]...)
	}
}

func (q *eventQueue) take() []Event {
	ev := q.ev
	q.ev, q.bytes = nil, 0
	return ev
}

func eventSize(e Event) int { return len(e.Event) + len(e.Data) }
