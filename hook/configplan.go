package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// poolPlan is the pool's plan as the hook uses it.
type poolPlan struct {
	pool *policy.Pool
	// someHost are the managed bits at least one host of the plan
	// offers (the plan's safe set, and each difference that not every
	// host misses): a guest that comes from a host of the pool can have
	// negotiated no other.
	someHost virtio.Features
}

// Pool is the pool the host config's plan pins (nil without one): every
// decision the hook makes passes it as policy.Request.Pool.
func (c *Config) Pool() *policy.Pool {
	if c == nil || c.plan == nil {
		return nil
	}
	return c.plan.pool
}

// loadPlan reads the plan file at path as LoadConfig reads the config: it
// decides what every guest is offered, so only root (or this user) may
// be able to write or replace it (checkTrustedFile), and it is read
// bounded (policy.MaxPlanFile). Errors wrap errs.ErrInvalid or the
// file's own error, and say what to do.
func loadPlan(path string) (*poolPlan, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("plan %s does not exist: write it with netctl plan -j HOST.json... > %s, or drop \"plan\": %w", path, path, errs.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	defer f.Close()
	if err := checkTrustedFile("plan", path, f); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, policy.MaxPlanFile+1))
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	p, err := parsePoolPlan(b)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	return p, nil
}

// parsePoolPlan is policy.ParsePlanFile plus which bits some host of the
// plan offers (from its differences).
func parsePoolPlan(b []byte) (*poolPlan, error) {
	pool, err := policy.ParsePlanFile(b)
	if err != nil {
		return nil, err
	}
	var res policy.PlanResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("policy: not a plan: %w: %w", err, errs.ErrInvalid)
	}
	some := pool.Offer
	for _, d := range res.Differences {
		f, ok := virtio.ParseFeature(d.Feature)
		if !ok {
			return nil, fmt.Errorf("the plan's differences name %.40q, which is no virtio feature netctl knows: write it again with netctl plan -j: %w", d.Feature, errs.ErrInvalid)
		}
		missing := 0
		for h := range d.Missing {
			if slices.Contains(pool.Hosts, h) {
				missing++
			}
		}
		if missing < len(pool.Hosts) {
			some |= f
		}
	}
	return &poolPlan{pool: pool, someHost: some}, nil
}
