package monitoring

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/netctl/netctl/test/prom"
)

// checkOnPrometheus checks the alerting rules and the dashboard on a
// real Prometheus that has scraped netctl exporter and loaded
// netctl-alerts.yml: every rule's last evaluation went well, every
// dashboard and variable query runs, and one whose metrics Prometheus
// all has answers with series that have the labels its legend shows. It
// returns the rules, how many queries had their answers checked, and the
// metrics queries named that Prometheus does not have.
func checkOnPrometheus(t *testing.T, ps *prom.Server) (rulesFile ruleFile, checked int, absentNames []string) {
	t.Helper()
	rules, body, err := ps.Rules()
	if err != nil {
		t.Fatal(err)
	}
	readYAML(t, alertsFile, &rulesFile)
	want := 0
	for _, g := range rulesFile.Groups {
		want += len(g.Rules)
	}
	if len(rules) != want {
		t.Errorf("Prometheus loaded %d rules, %s has %d:\n%s", len(rules), alertsFile, want, body)
	}
	for _, r := range rules {
		if r.Health != "ok" || r.LastError != "" || !r.Evaluated {
			t.Errorf("rule %s: health %q, last error %q, evaluated %v", r.Name, r.Health, r.LastError, r.Evaluated)
		}
	}

	// Which netctl metrics Prometheus has from this exporter.
	have := map[string]bool{}
	samples, _, err := ps.Query(`count by (__name__) ({__name__=~"netctl_.+"})`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		have[s.Labels["__name__"]] = true
	}
	t.Logf("the exporter serves %d netctl metrics here", len(have))

	d := readDashboard(t)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	type q struct{ what, expr, legend string }
	var qs []q
	for _, v := range d.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			qs = append(qs, q{"variable " + v.Name, m[1], "{{" + m[2] + "}}"})
		}
	}
	walkPanels(d.Panels, func(p panel) {
		for _, tg := range p.Targets {
			qs = append(qs, q{p.Title + " " + tg.RefID, tg.Expr, tg.LegendFormat})
		}
	})
	for _, r := range rulesFile.Groups[0].Rules {
		qs = append(qs, q{"alert " + r.Alert, r.Expr, ""})
	}
	absent := map[string]bool{}
	for _, x := range qs {
		expr := realVars.ReplaceAllStringFunc(x.expr, func(m string) string {
			if v, ok := realBuiltins[strings.Trim(m, "${}")]; ok {
				return v
			}
			return ".*"
		})
		got, body, err := ps.Query(expr)
		if err != nil {
			t.Errorf("%s: %s: %v", x.what, expr, err)
			continue
		}
		all := true
		for _, n := range metricName.FindAllString(expr, -1) {
			if !have[n] {
				all = false
				absent[n] = true
			}
		}
		if !all || strings.HasPrefix(x.what, "alert ") {
			continue // it ran; what it gives needs series this host cannot make, or is an alert's filter
		}
		checked++
		if len(got) == 0 {
			t.Errorf("%s: %s: no series, although the exporter serves each metric it names: %s", x.what, expr, body)
		}
		for _, s := range got {
			for _, m := range legendLabel.FindAllStringSubmatch(x.legend, -1) {
				if s.Labels[m[1]] == "" {
					t.Errorf("%s: %s: a series without %s, which its legend %q shows: %v", x.what, expr, m[1], x.legend, s.Labels)
				}
			}
		}
	}
	absentNames = slices.Sorted(maps.Keys(absent))
	t.Logf("%d queries ran, %d of them on series served here (answers and legends checked); not served here: %v", len(qs), checked, absentNames)
	return rulesFile, checked, absentNames
}

// realVars are Grafana's variables in a query; realBuiltins what stands
// in for the built-ins under a Prometheus that scrapes every 2 s.
var (
	realVars     = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`)
	realBuiltins = map[string]string{"__rate_interval": "20s", "__interval": "2s", "__range": "1m"}
)
