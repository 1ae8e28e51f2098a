package prom

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a running Prometheus server.
type Server struct {
	Addr string // 127.0.0.1:9090
	h    *HTTP
}

// Start runs Debian's prometheus in the test's network namespace, on
// loopback, scraping target every 2 s; its config and storage in temp
// dirs. It returns once Prometheus says it is ready.
func Start(t testing.TB, h *HTTP, target string) *Server {
	t.Helper()
	return StartRules(t, h, target)
}

// StartRules is Start with rule files (absolute paths) that Prometheus
// evaluates every 2 s; Rules reads how each evaluation went.
func StartRules(t testing.TB, h *HTTP, target string, ruleFiles ...string) *Server {
	t.Helper()
	return start(t, h, target, "", ruleFiles)
}

// StartChroot is StartRules for a VM test: Prometheus is the host's
// (root is where the VM sees the host's /, test/l2.Root, made a chroot by
// l2.Chroot), run as chroot root /usr/bin/prometheus; its config, storage
// and a copy of each rule file go in a directory under root's /run.
func StartChroot(t testing.TB, h *HTTP, root, target string, ruleFiles ...string) *Server {
	t.Helper()
	return start(t, h, target, root, ruleFiles)
}

func start(t testing.TB, h *HTTP, target, root string, ruleFiles []string) *Server {
	t.Helper()
	bin, dir := "prometheus", ""
	if root == "" {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("prometheus: %v: run test/host-deps.sh (Debian's prometheus package)", err)
		}
		dir = t.TempDir()
	} else {
		bin = "/usr/bin/prometheus"
		if _, err := os.Stat(root + bin); err != nil {
			t.Fatalf("prometheus: %v: run test/host-deps.sh (Debian's prometheus package) on the host", err)
		}
		d, err := os.MkdirTemp(root+"/run", "prom")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	// inside is a path of dir as Prometheus sees it.
	inside := func(p string) string { return strings.TrimPrefix(p, root) }
	cfg := filepath.Join(dir, "prometheus.yml")
	rules := ""
	if len(ruleFiles) > 0 {
		rules = "rule_files:\n"
		for i, f := range ruleFiles {
			if root != "" {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				f = filepath.Join(dir, fmt.Sprintf("rules%d.yml", i))
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rules += fmt.Sprintf("  - %q\n", inside(f))
		}
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
%sscrape_configs:
  - job_name: netctl
    static_configs:
      - targets: ['%s']
`, rules, target)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: "127.0.0.1:9090", h: h}
	var out Buffer
	args := []string{bin, "--config.file=" + inside(cfg), "--storage.tsdb.path=" + inside(filepath.Join(dir, "data")), "--web.listen-address=" + s.Addr}
	if root != "" {
		args = append([]string{"chroot", root}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if code, _ := h.Get("http://" + s.Addr + "/-/ready"); code == 200 {
			return s
		}
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus never became ready:\n%s", out.String())
		}
	}
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query asks Prometheus's HTTP API for the instant query's series; body
// is its answer as it came.
func (s *Server) Query(query string) (samples []Sample, body string, err error) {
	code, body := s.h.Get("http://" + s.Addr + "/api/v1/query?query=" + url.QueryEscape(query))
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil || r.Status != "success" {
		return nil, body, fmt.Errorf("prometheus: query %s: %d %s", query, code, body)
	}
	for _, x := range r.Data.Result {
		str, ok := x.Value[1].(string)
		if !ok {
			return nil, body, fmt.Errorf("prometheus: query %s: a value that is not a string: %s", query, body)
		}
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, body, fmt.Errorf("prometheus: query %s: %w", query, err)
		}
		samples = append(samples, Sample{Labels: x.Metric, Value: v})
	}
	return samples, body, nil
}

// Wait queries Prometheus (instant query, every 500 ms) until the first
// series' value satisfies ok, and returns it; ctx ending fails the test.
func (s *Server) Wait(ctx context.Context, t testing.TB, query string, ok func(float64) bool) float64 {
	t.Helper()
	return s.WaitSample(ctx, t, query, ok).Value
}

// WaitSample is Wait returning the first series with its labels.
func (s *Server) WaitSample(ctx context.Context, t testing.TB, query string, ok func(float64) bool) Sample {
	t.Helper()
	last := ""
	for {
		samples, body, err := s.Query(query)
		last = body
		if err == nil && len(samples) > 0 && ok(samples[0].Value) {
			return samples[0]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Prometheus: %s never gave the value wanted; last answer: %s", query, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Rule is one rule of Prometheus's /api/v1/rules: its name (the alert's or
// the recording rule's), whether its last evaluation went well ("ok",
// "err", "unknown" before the first) and the error.
type Rule struct {
	Name, Health, LastError string
	Evaluated               bool // lastEvaluation is set
}

// Rules are every loaded rule as /api/v1/rules has it.
func (s *Server) Rules() ([]Rule, string, error) {
	code, body := s.h.Get("http://" + s.Addr + "/api/v1/rules")
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Groups []struct {
				Rules []struct {
					Name           string `json:"name"`
					Health         string `json:"health"`
					LastError      string `json:"lastError"`
					LastEvaluation string `json:"lastEvaluation"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil || r.Status != "success" {
		return nil, body, fmt.Errorf("prometheus: rules: %d %s", code, body)
	}
	var out []Rule
	for _, g := range r.Data.Groups {
		for _, x := range g.Rules {
			out = append(out, Rule{Name: x.Name, Health: x.Health, LastError: x.LastError,
				Evaluated: x.LastEvaluation != "" && !strings.HasPrefix(x.LastEvaluation, "0001-")})
		}
	}
	return out, body, nil
}
