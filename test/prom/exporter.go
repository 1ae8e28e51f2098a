package prom

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Exporter is a running netctl exporter.
type Exporter struct {
	URL    string // http://127.0.0.1:PORT
	Stderr *Buffer
	cmd    *exec.Cmd
	h      *HTTP
	exited chan error
	stop   bool // Stop ran
}

// StartExporter starts bin exporter --listen addr ARGS... (with env, or
// the test's environment when env is nil) as a child of the calling
// thread and waits until /healthz answers. When the test ends, an
// exporter still running is stopped (SIGINT) and must exit 0.
func StartExporter(t testing.TB, h *HTTP, bin, addr string, env []string, args ...string) *Exporter {
	t.Helper()
	p := &Exporter{URL: "http://" + addr, Stderr: &Buffer{}, h: h}
	p.cmd = exec.Command(bin, append([]string{"exporter", "--listen", addr}, args...)...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.Stderr, p.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	p.exited = exited
	go func() { exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.stop {
			return
		}
		select {
		case <-p.exited:
			return // it exited by itself: its test says whether that was right
		default:
		}
		p.Stop(t, os.Interrupt)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if code, body := p.Get("/healthz"); code == 200 && body == "ok\n" {
			return p
		}
		select {
		case err := <-exited:
			t.Fatalf("netctl exporter exited: %v\n%s", err, p.Stderr.String())
		case <-ctx.Done():
			t.Fatalf("netctl exporter's /healthz never answered:\n%s", p.Stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop sends the exporter sig (SIGINT or SIGTERM) and checks that it
// exits 0 within 30 s (else it is killed and the test fails).
func (p *Exporter) Stop(t testing.TB, sig os.Signal) {
	t.Helper()
	p.stop = true
	p.cmd.Process.Signal(sig)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("netctl exporter exited with %v on %v:\n%s", err, sig, p.Stderr.String())
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("netctl exporter did not stop on %v:\n%s", sig, p.Stderr.String())
	}
}

// Get gets path (e.g. /metrics) of the exporter: its status and body,
// status 0 with the error when the request fails.
func (p *Exporter) Get(path string) (int, string) { return p.h.Get(p.URL + path) }

// Alive says whether the exporter process still runs.
func (p *Exporter) Alive() bool { return p.cmd.Process.Signal(syscall.Signal(0)) == nil }

// Scrape gets /metrics and parses it; a scrape that fails or does not
// parse fails the test.
func (p *Exporter) Scrape(t testing.TB) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	code, body := p.Get("/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s\nexporter:\n%s", code, body, p.Stderr.String())
	}
	mfs, err := Parse(body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return body, mfs
}

// Parse parses Prometheus's text format.
func Parse(body string) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	return parser.TextToMetricFamilies(strings.NewReader(body))
}
