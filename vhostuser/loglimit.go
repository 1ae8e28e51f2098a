package vhostuser

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Warnings a front-end can cause at will (a refused request, a refused
// connection) are rate-limited: at most warnBurst lines per warnWindow
// for each kind; the next line let through says how many were held back
// ("not_logged"), and so does a line when the front-end leaves.
const (
	warnBurst  = 5
	warnWindow = 10 * time.Second
)

// logLimit is one kind of warning's rate limit. Safe for concurrent use.
type logLimit struct {
	mu    sync.Mutex
	now   func() time.Time // time.Now; tests may replace it
	start time.Time        // of the current window
	n     int              // lines let through in the current window
	held  int              // held back since the last line let through
}

// allow says whether one more line may be logged now and, if so, how
// many were held back before it (they are then counted as reported).
func (l *logLimit) allow() (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.now != nil {
		now = l.now()
	}
	if l.start.IsZero() || now.Sub(l.start) >= warnWindow {
		l.start, l.n = now, 0
	}
	if l.n >= warnBurst {
		l.held++
		return false, 0
	}
	l.n++
	held, l.held = l.held, 0
	return true, held
}

// flush returns how many lines were held back and not yet reported, and
// counts them as reported.
func (l *logLimit) flush() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.held
	l.held = 0
	return held
}

// warn logs msg through l's limit: nothing when the limit holds it back,
// else the line with, when some were held back before it, their number.
func (l *logLimit) warn(log *slog.Logger, msg string, args ...any) {
	ok, held := l.allow()
	if !ok {
		return
	}
	if held > 0 {
		args = append(args, "not_logged", held)
	}
	log.Warn(msg, args...)
}

// report logs, once, how many lines of what were held back and not yet
// reported.
func (l *logLimit) report(log *slog.Logger, what string) {
	if held := l.flush(); held > 0 {
		log.Warn(fmt.Sprintf("vhost-user: %d more %s were not logged (at most %d a kind per %v)", held, what, warnBurst, warnWindow),
			"not_logged", held)
	}
}
