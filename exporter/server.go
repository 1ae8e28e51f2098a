package exporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netctl/netctl/internal/errs"
)

// Handler serves /metrics (a scrape: list, sample, answer), /healthz
// ("ok": the exporter runs; it says nothing about the VMs) and / (a
// pointer to both).
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", e.serveMetrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "netctl exporter: per-queue virtio-net figures at /metrics; /healthz says it runs\n")
	})
	return mux
}

// scrapeTimeoutMargin is what the exporter leaves of Prometheus's own
// scrape timeout for writing the answer.
const scrapeTimeoutMargin = 250 * time.Millisecond

// serveMetrics is one scrape under the lower of Options.ScrapeTimeout and
// the request's X-Prometheus-Scrape-Timeout-Seconds (less a margin), and
// the request's own context (a client that hangs up cancels it).
func (e *Exporter) serveMetrics(w http.ResponseWriter, r *http.Request) {
	d := e.opts.ScrapeTimeout
	if v, err := strconv.ParseFloat(r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"), 64); err == nil && v > 0 && v < 3600 {
		if pd := time.Duration(v*float64(time.Second)) - scrapeTimeoutMargin; pd > 0 && pd < d {
			d = pd
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	defer cancel()
	var ms []prometheus.Metric
	if err := e.scrape(ctx, func(m prometheus.Metric) { ms = append(ms, m) }); err != nil {
		http.Error(w, "netctl exporter: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(fixed(ms)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// fixed is a Collector of metrics gathered already.
type fixed []prometheus.Metric

func (f fixed) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs() {
		ch <- d
	}
}

func (f fixed) Collect(ch chan<- prometheus.Metric) {
	for _, m := range f {
		ch <- m
	}
}

// Listen opens addr for the exporter. A non-loopback address (which
// includes ":9465" and "0.0.0.0:9465": every address) is refused unless
// allowRemote: the metrics name VMs, NICs and QMP sockets, and the
// exporter has no TLS or authentication of its own. A host name must
// resolve to loopback addresses only.
func Listen(ctx context.Context, addr string, allowRemote bool) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %v: give HOST:PORT, e.g. 127.0.0.1:9465: %w", addr, err, errs.ErrInvalid)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return nil, fmt.Errorf("--listen %q: port %q: use a number 0 to 65535: %w", addr, port, errs.ErrInvalid)
	}
	if !allowRemote {
		ip, err := checkLoopback(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("--listen %q: %v: listen on 127.0.0.1 or [::1] (and let Prometheus scrape through a proxy), or pass --allow-remote to serve the metrics to the network without TLS or authentication: %w",
				addr, err, errs.ErrInvalid)
		}
		// The address checked, not the name again: a second lookup may
		// answer otherwise (DNS).
		addr = net.JoinHostPort(ip.String(), port)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

// lookupIPAddr resolves a host name (tests replace it).
var lookupIPAddr = net.DefaultResolver.LookupIPAddr

// checkLoopback checks that host is or names loopback addresses only and
// returns the one to listen on (a name's first IPv4 address, as Go's
// own Listen picks, else its first).
func checkLoopback(ctx context.Context, host string) (net.IP, error) {
	if host == "" {
		return nil, errors.New("no host means every address, not only loopback")
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return nil, fmt.Errorf("%s is not a loopback address", ip)
		}
		return ip, nil
	}
	ips, err := lookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %v", host, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	var pick net.IP
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return nil, fmt.Errorf("%s resolves to %s, which is not a loopback address", host, ip.IP)
		}
		if pick == nil || (pick.To4() == nil && ip.IP.To4() != nil) {
			pick = ip.IP
		}
	}
	return pick, nil
}

// Serve serves h on ln until ctx is done, then shuts down (waiting up to
// 5 s for scrapes under way). It closes ln.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
