package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"

	"github.com/netctl/netctl/exporter"
)

const (
	dashboardFile = "netctl-dashboard.json"
	alertsFile    = "netctl-alerts.yml"
	alertTests    = "netctl-alerts_test.yml"
)

// promtool is the path of Debian's promtool (test/host-deps.sh installs
// it). Without it the test skips, but fails under make test
// (NETCTL_VM_DEPS=1: make vm-deps ran first and must have installed it).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("NETCTL_VM_DEPS") == "1" {
			t.Fatalf("promtool is not installed although make vm-deps ran (test/host-deps.sh installs Debian's prometheus): %v", err)
		}
		t.Skipf("promtool is not installed (bash test/host-deps.sh installs Debian's prometheus package): %v", err)
	}
	return p
}

// runPromtool runs promtool args in dir and fails the test on a non-zero
// exit.
func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The alerting rules file and promtool's unit tests of it.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// readYAML reads the parts of a YAML file that v has.
func readYAML(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestAlertRules: promtool check rules and test rules pass; every alert
// has a severity, a summary and a description that says what to run,
// only asks for metrics and labels the exporter serves, and is tested
// both firing and not firing.
func TestAlertRules(t *testing.T) {
	runPromtool(t, ".", "check", "rules", alertsFile)
	out := runPromtool(t, ".", "test", "rules", alertTests)
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules did not say SUCCESS:\n%s", out)
	}

	var rules ruleFile
	readYAML(t, alertsFile, &rules)
	var tests ruleTests
	readYAML(t, alertTests, &tests)
	if !slices.Equal(tests.RuleFiles, []string{alertsFile}) {
		t.Errorf("%s tests %v, want [%s]", alertTests, tests.RuleFiles, alertsFile)
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	known := exporter.MetricLabels()
	for _, g := range tests.Tests {
		for _, in := range g.InputSeries {
			checkSeries(t, known, in.Series)
		}
		for _, a := range g.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert (%s): this file holds alerts only", g.Name, r.Record)
				continue
			}
			alerts = append(alerts, r.Alert)
			if r.For == "" {
				t.Errorf("%s: no for: (a single scrape would page)", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", r.Alert)
			}
			if d := r.Annotations["description"]; !strings.Contains(d, "netctl ") {
				t.Errorf("%s: the description does not say which netctl command to run: %s", r.Alert, d)
			}
			labels := checkQuery(t, known, r.Alert, r.Expr)
			for _, a := range r.Annotations {
				for _, m := range templateLabel.FindAllStringSubmatch(a, -1) {
					if !labels[m[1]] {
						t.Errorf("%s: an annotation uses $labels.%s, which none of %s's metrics has", r.Alert, m[1], r.Alert)
					}
				}
				for _, q := range annotationQuery.FindAllString(a, -1) {
					checkQuery(t, known, r.Alert+" (annotation)", q)
				}
			}
			if !firing[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: %s has no test of it firing (%v) or of it not firing (%v)", r.Alert, alertTests, firing[r.Alert], quiet[r.Alert])
			}
		}
	}
	want := []string{"NetctlNICDown", "NetctlQueueStalled", "NetctlReceiveStalled", "NetctlSourceMissing", "NetctlTargetDown", "NetctlVhostWorkerSaturated"}
	sort.Strings(alerts)
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}
}

var (
	// metricName is a netctl metric named in a query.
	metricName = regexp.MustCompile(`\bnetctl_[a-zA-Z0-9_]+\b`)
	// matcherBlock is a selector's {...} (not a template's {{...}}).
	matcherBlock = regexp.MustCompile(`\{([^{}]*)\}`)
	matcherLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// labelList is by (...), on (...), group_left (...) and their kin.
	labelList     = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)`)
	templateLabel = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	legendLabel   = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	// annotationQuery is a query an annotation's template sends (the
	// printf before | query).
	annotationQuery = regexp.MustCompile("netctl_[a-z_]+\\{[^}`]*\\}")
)

// checkQuery holds query to the exporter's metrics (known, from
// exporter.MetricLabels): it names at least one, none that the exporter
// does not serve, and only labels one of them has (or job and instance,
// which Prometheus adds). It returns the labels the query may carry.
func checkQuery(t *testing.T, known map[string][]string, what, query string) map[string]bool {
	t.Helper()
	allowed := map[string]bool{"job": true, "instance": true}
	names := metricName.FindAllString(query, -1)
	if len(names) == 0 {
		t.Errorf("%s: %q names no netctl metric", what, query)
	}
	for _, n := range names {
		l, ok := known[n]
		if !ok {
			t.Errorf("%s: %s is not a metric netctl exporter serves (exporter.MetricLabels): %q", what, n, query)
			continue
		}
		for _, x := range l {
			allowed[x] = true
		}
	}
	var used []string
	for _, b := range matcherBlock.FindAllStringSubmatch(query, -1) {
		for _, m := range matcherLabel.FindAllStringSubmatch(b[1], -1) {
			used = append(used, m[1])
		}
	}
	for _, b := range labelList.FindAllStringSubmatch(query, -1) {
		for _, l := range strings.Split(b[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				used = append(used, l)
			}
		}
	}
	for _, l := range used {
		if !allowed[l] {
			t.Errorf("%s: label %q: no metric of %q has it (%v)", what, l, query, names)
		}
	}
	return allowed
}

var seriesSyntax = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$`)

// checkSeries holds a test's input series to what the exporter serves
// and Prometheus stores: the metric's labels, job and instance, all of
// them.
func checkSeries(t *testing.T, known map[string][]string, series string) {
	t.Helper()
	m := seriesSyntax.FindStringSubmatch(series)
	if m == nil {
		t.Errorf("input series %q: not NAME{LABELS}", series)
		return
	}
	want, ok := known[m[1]]
	if !ok {
		t.Errorf("input series %q: netctl exporter serves no %s", series, m[1])
		return
	}
	want = append(slices.Clone(want), "job", "instance")
	var have []string
	for _, l := range matcherLabel.FindAllStringSubmatch(m[2], -1) {
		have = append(have, l[1])
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Errorf("input series %q: labels %v, the exporter's series (with job and instance) have %v", series, have, want)
	}
}

// The dashboard, as far as the test reads it.
type dashboard struct {
	UID           string                                  `json:"uid"`
	Title         string                                  `json:"title"`
	SchemaVersion int                                     `json:"schemaVersion"`
	Inputs        []struct{ Name, Type, PluginID string } `json:"__inputs"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasource     `json:"datasource"`
			AllValue   string          `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *datasource              `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []struct {
		RefID        string      `json:"refId"`
		Expr         string      `json:"expr"`
		LegendFormat string      `json:"legendFormat"`
		Datasource   *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// grafanaVar is a dashboard variable in a query: $name, ${name} or
// ${name:format}.
var grafanaVar = regexp.MustCompile(`\$(?:\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|([a-zA-Z_][a-zA-Z0-9_]*))`)

// grafanaBuiltins are Grafana's own variables a query may use, with what
// stands in for each when promtool checks it.
var grafanaBuiltins = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__range_s": "3600", "__interval_ms": "60000"}

// expandVars makes a dashboard query PromQL: a built-in becomes a
// duration, a dashboard variable (all of them multi-value regexes, used
// with =~) becomes .*. A variable the dashboard does not define is an
// error.
func expandVars(t *testing.T, vars map[string]bool, what, q string) string {
	t.Helper()
	return grafanaVar.ReplaceAllStringFunc(q, func(m string) string {
		s := grafanaVar.FindStringSubmatch(m)
		name := s[1] + s[2]
		if v, ok := grafanaBuiltins[name]; ok {
			return v
		}
		if !vars[name] {
			t.Errorf("%s: $%s is not a variable of the dashboard: %q", what, name, q)
		}
		return ".*"
	})
}

// readDashboard reads netctl-dashboard.json.
func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// walkPanels calls f on every panel, those in rows too.
func walkPanels(ps []panel, f func(panel)) {
	for _, p := range ps {
		f(p)
		walkPanels(p.Panels, f)
	}
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// TestDashboard: the dashboard parses, uses the ${DS_PROMETHEUS}
// datasource variable everywhere, has the vm, nic and queue variables from
// the exporter's labels, and every query (panels' and variables') names
// only metrics and labels netctl exporter serves, only variables the
// dashboard defines, and is valid PromQL (promtool check rules on the
// queries as recording rules).
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both are needed to import and link it", d.UID, d.Title)
	}
	if d.SchemaVersion < 39 {
		t.Errorf("schemaVersion %d: a current Grafana's (10.4 and later) is 39 or more", d.SchemaVersion)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs %+v: want DS_PROMETHEUS, a prometheus datasource (what Grafana's import asks for)", d.Inputs)
	}
	ds := datasource{Type: "prometheus", UID: "${DS_PROMETHEUS}"}
	known := exporter.MetricLabels()
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["DS_PROMETHEUS"] {
		t.Errorf("no DS_PROMETHEUS datasource variable")
	}

	// The queries, each as a recording rule for promtool check rules.
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var recs []rule
	add := func(what, q string) {
		recs = append(recs, rule{Record: fmt.Sprintf("netctl_dashboard:query_%d", len(recs)), Expr: expandVars(t, vars, what, q)})
	}

	byVar := map[string]string{}
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			var q string
			if json.Unmarshal(v.Query, &q) != nil || q != "prometheus" {
				t.Errorf("variable %s: a datasource variable of %s, want prometheus", v.Name, v.Query)
			}
		case "query":
			if v.Datasource == nil || *v.Datasource != ds {
				t.Errorf("variable %s: datasource %+v, want %+v", v.Name, v.Datasource, ds)
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			if m == nil {
				t.Errorf("variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, v.Definition)
				continue
			}
			var q struct{ Query string }
			if json.Unmarshal(v.Query, &q) != nil || q.Query != v.Definition {
				t.Errorf("variable %s: its query %s is not its definition %q", v.Name, v.Query, v.Definition)
			}
			what := "variable " + v.Name
			allowed := checkQuery(t, known, what, m[1])
			if !allowed[m[2]] {
				t.Errorf("%s: label_values of %s, a label %s does not have", what, m[2], m[1])
			}
			byVar[v.Name] = m[2]
			add(what, m[1])
		default:
			t.Errorf("variable %s: type %s", v.Name, v.Type)
		}
	}
	for _, v := range []string{"vm", "nic", "queue"} {
		if byVar[v] != v {
			t.Errorf("variable %s: label_values of %q, want the exporter's %s label", v, byVar[v], v)
		}
	}

	ids := map[int]bool{}
	n := 0
	walkPanels(d.Panels, func(p panel) {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v outside Grafana's 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			return
		}
		if p.Datasource == nil || *p.Datasource != ds {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, ds)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			what := fmt.Sprintf("panel %q query %s", p.Title, tg.RefID)
			if tg.Datasource == nil || *tg.Datasource != ds {
				t.Errorf("%s: datasource %+v, want %+v", what, tg.Datasource, ds)
			}
			allowed := checkQuery(t, known, what, tg.Expr)
			for _, m := range legendLabel.FindAllStringSubmatch(tg.LegendFormat, -1) {
				if !allowed[m[1]] {
					t.Errorf("%s: legend {{%s}}: no metric of %q has it", what, m[1], tg.Expr)
				}
			}
			add(what, tg.Expr)
			n++
		}
	})
	t.Logf("%d panel queries, %d in all", n, len(recs))

	// What the issue asks of it: these metrics each in some panel.
	var all strings.Builder
	for _, r := range recs {
		all.WriteString(r.Expr + "\n")
	}
	for _, m := range []string{"netctl_link_receive_packets_total", "netctl_link_transmit_packets_total", "netctl_link_receive_bytes_total",
		"netctl_link_transmit_bytes_total", "netctl_queue_offered_descriptors_total", "netctl_queue_completed_descriptors_total",
		"netctl_vhost_worker_cpu_seconds_total", "netctl_nic_up", "netctl_source_up", "netctl_source_missing_info", "netctl_scrape_duration_seconds"} {
		if !strings.Contains(all.String(), m) {
			t.Errorf("no panel shows %s", m)
		}
	}

	// promtool: every query is PromQL (JSON is YAML).
	file, err := json.MarshalIndent(map[string]any{"groups": []any{map[string]any{"name": "netctl_dashboard", "rules": recs}}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard-queries.yml"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runPromtool(t, dir, "check", "rules", "dashboard-queries.yml"); t.Failed() {
		t.Logf("the queries:\n%s\n%s", file, out)
	}
}
