package prom

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// find is the first sample of family name whose labels include want,
// with all its labels.
func find(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, map[string]string) {
	mf := mfs[name]
	if mf == nil {
		return nil, nil
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m, have
	}
	return nil, nil
}

// Value is the value of the first sample of family name whose labels
// include want.
func Value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	m, _ := find(mfs, name, want)
	switch {
	case m == nil:
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Untyped != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// LabelValue is the value of label of the first sample of name whose
// labels include want ("" when there is none).
func LabelValue(mfs map[string]*dto.MetricFamily, name string, want map[string]string, label string) string {
	_, have := find(mfs, name, want)
	return have[label]
}

// WithLabel is m and k=v.
func WithLabel(m map[string]string, k, v string) map[string]string {
	n := map[string]string{k: v}
	for a, b := range m {
		n[a] = b
	}
	return n
}

// PromtoolCheck runs promtool check metrics on body (Debian's prometheus
// package; test/host-deps.sh installs it) and fails the test on any
// complaint.
func PromtoolCheck(t testing.TB, body string) {
	t.Helper()
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("promtool check metrics: %v\n%s\n--- the metrics:\n%s", err, out, body)
	}
}
