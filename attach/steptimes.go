package attach

import "time"

// StepTime is how long one step of Attach took.
type StepTime struct {
	Step string  `json:"step"`
	MS   float64 `json:"ms"`
}

// StepTimes, given in Request.Times, receives how long each step of
// Attach took, in order (make bench's per-step breakdown).
type StepTimes struct {
	Steps []StepTime `json:"steps"`
	last  time.Time
}

// mark ends step (begun at the previous mark, or at Attach's start).
func (t *StepTimes) mark(step string) {
	if t == nil {
		return
	}
	now := time.Now()
	t.Steps = append(t.Steps, StepTime{Step: step, MS: float64(now.Sub(t.last).Microseconds()) / 1000})
	t.last = now
}

func (t *StepTimes) begin() {
	if t != nil {
		t.last = time.Now()
	}
}
