package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStepTimesEnv: attach's step times are kept only when
// NETCTL_STEP_TIMES is set; the step from exec to main only when it is a
// plausible start time (make bench's, in Unix nanoseconds, a little before
// main), not for a value such as 1 (as the comments say to set it), a
// time after main or long before it, or garbage.
func TestStepTimesEnv(t *testing.T) {
	saved := mainStart
	t.Cleanup(func() { mainStart = saved })
	mainStart = time.Now()
	t.Setenv("NETCTL_STEP_TIMES", "")
	if st := stepTimes(); st != nil {
		t.Fatalf("unset: %+v", st)
	}
	for _, v := range []string{"1", "yes", "-5", strconv.FormatInt(mainStart.Add(time.Hour).UnixNano(), 10), strconv.FormatInt(mainStart.Add(-48*time.Hour).UnixNano(), 10)} {
		t.Setenv("NETCTL_STEP_TIMES", v)
		st := stepTimes()
		if st == nil {
			t.Fatalf("NETCTL_STEP_TIMES=%s: no times kept", v)
		}
		for _, s := range st.Steps {
			if strings.HasPrefix(s.Step, "exec to main") {
				t.Errorf("NETCTL_STEP_TIMES=%s: %+v", v, s)
			}
		}
	}
	t.Setenv("NETCTL_STEP_TIMES", strconv.FormatInt(mainStart.Add(-5*time.Millisecond).UnixNano(), 10))
	st := stepTimes()
	if st == nil || len(st.Steps) != 2 || st.Steps[0].MS < 4.9 || st.Steps[0].MS > 5.1 {
		t.Errorf("a start 5 ms before main: %+v", st)
	}
}
