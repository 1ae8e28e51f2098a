package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/netctl/netctl/internal/errs"
)

// DefaultConfigPath is the host config file the hook reads when it exists.
const DefaultConfigPath = "/etc/netctl/hook.json"

// DefaultLogPath is where the hook appends its log (besides stderr).
const DefaultLogPath = "/var/log/netctl/hook.log"

// DefaultVDPADir is where published vdpa symlinks live: the domain XML
// names /run/netctl/vdpa/NAME as the interface's source.
const DefaultVDPADir = "/run/netctl/vdpa"

// DefaultTimeout bounds one hook call.
const DefaultTimeout = 30 * time.Second

// MaxConfigSize bounds the host config file.
const MaxConfigSize = 64 << 10

// Manage says which interfaces netctl manages without per-interface
// metadata.
type Manage string

const (
	// ManageListed (the default): only interfaces the domain's netctl
	// metadata lists by MAC, and vdpa interfaces whose source is under
	// the vdpa directory.
	ManageListed Manage = "listed"
	// ManageAll: also every ethernet interface with
	// <target managed='no'/> and every direct interface.
	ManageAll Manage = "all"
)

// Config is the host's defaults for the hook (/etc/netctl/hook.json).
type Config struct {
	// Manage: "listed" (default) or "all".
	Manage Manage `json:"manage,omitempty"`
	// Mgmtdev is the vdpa management device for vdpa interfaces whose
	// metadata names none ("vduse", "pci/0000:65:00.2").
	Mgmtdev string `json:"mgmtdev,omitempty"`
	// TapOwner is who owns the taps the hook creates (TUNSETOWNER): ""
	// (the default) sets no owner, so only root can attach queues, which
	// is all libvirt needs in system mode (libvirtd opens the tap as root
	// and passes QEMU the fds); "seclabel" gives them to the user of the
	// domain's DAC seclabel (QEMU's user); a user name or number to that
	// user. An owner can add queues to the tap, or open a single-queue
	// tap before QEMU does: set one only where QEMU opens the tap itself.
	TapOwner string `json:"tap_owner,omitempty"`
	// Timeout bounds one hook call ("30s"); default DefaultTimeout.
	Timeout string `json:"timeout,omitempty"`
	// Log is the log file; "" means DefaultLogPath, "-" none.
	Log string `json:"log,omitempty"`
	// VDPADir is where vdpa symlinks are published; default DefaultVDPADir.
	VDPADir string `json:"vdpa_dir,omitempty"`
	// Plan is the pool's plan (netctl plan -j's output, an absolute
	// path): every decision the hook makes offers at most its feature
	// set, and migrate begin takes its hosts for the ones a domain may
	// come from. LoadConfig reads it (trusted as the config is); a plan
	// that does not load is a config error.
	Plan string `json:"plan,omitempty"`

	timeout time.Duration
	plan    *poolPlan // what LoadConfig read from Plan
}

// DefaultConfig is the config used when the file does not exist.
func DefaultConfig() *Config {
	c := &Config{}
	if err := c.validate(); err != nil {
		panic(err) // the defaults are valid
	}
	return c
}

// TimeoutOrDefault is the config's timeout.
func (c *Config) TimeoutOrDefault() time.Duration {
	if c.timeout <= 0 {
		return DefaultTimeout
	}
	return c.timeout
}

// LoadConfig reads the host config at path; a missing file gives the
// defaults. A file that someone other than root (or this user) could
// write or replace is refused (checkTrusted). A bad file is an error (wrapping errs.ErrInvalid) that names
// the field.
func LoadConfig(path string) (*Config, error) {
	// O_NONBLOCK: a FIFO (or a device) at the path opens at once and
	// is refused below, instead of holding the hook, and libvirtd's
	// domain start with it, until a writer comes.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return DefaultConfig(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("hook config %s: %w", path, err)
	}
	defer f.Close()
	if err := checkTrusted(path, f); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("hook config %s: %w", path, err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("hook config %s: %w", path, err)
	}
	if c.Plan != "" {
		if c.plan, err = loadPlan(c.Plan); err != nil {
			return nil, fmt.Errorf("hook config %s: %w", path, err)
		}
	}
	return c, nil
}

// ParseConfig decodes and validates a host config.
func ParseConfig(b []byte) (*Config, error) {
	if len(b) > MaxConfigSize {
		return nil, fmt.Errorf("%d bytes, at most %d: %w", len(b), MaxConfigSize, errs.ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%v (fields: manage, mgmtdev, tap_owner, timeout, log, vdpa_dir, plan): %w", err, errs.ErrInvalid)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) validate() error {
	switch c.Manage {
	case "":
		c.Manage = ManageListed
	case ManageListed, ManageAll:
	default:
		return fmt.Errorf("manage %.32q: use \"listed\" or \"all\": %w", c.Manage, errs.ErrInvalid)
	}
	if c.Mgmtdev != "" {
		if err := checkMgmtdev(c.Mgmtdev); err != nil {
			return err
		}
	}
	if c.TapOwner != "" && c.TapOwner != TapOwnerSeclabel {
		if _, err := lookupUser(c.TapOwner); err != nil {
			return fmt.Errorf("tap_owner: %w", err)
		}
	}
	if c.Timeout != "" {
		d, err := time.ParseDuration(c.Timeout)
		if err != nil || d <= 0 || d > 10*time.Minute {
			return fmt.Errorf("timeout %.32q: use a duration from 1s to 10m (\"30s\"): %w", c.Timeout, errs.ErrInvalid)
		}
		c.timeout = d
	}
	if c.Log != "" && c.Log != "-" && !filepath.IsAbs(c.Log) {
		return fmt.Errorf("log %.128q: use an absolute path, or \"-\" for none: %w", c.Log, errs.ErrInvalid)
	}
	if c.VDPADir == "" {
		c.VDPADir = DefaultVDPADir
	}
	if !filepath.IsAbs(c.VDPADir) || filepath.Clean(c.VDPADir) != c.VDPADir {
		return fmt.Errorf("vdpa_dir %.128q: use a clean absolute path: %w", c.VDPADir, errs.ErrInvalid)
	}
	if c.Plan != "" && (!filepath.IsAbs(c.Plan) || filepath.Clean(c.Plan) != c.Plan) {
		return fmt.Errorf("plan %.128q: use the clean absolute path of netctl plan -j's output (/etc/netctl/pool.json): %w", c.Plan, errs.ErrInvalid)
	}
	return nil
}

func checkMgmtdev(s string) error {
	if len(s) > 64 || s == "" || strings.Count(s, "/") > 1 || strings.ContainsAny(s, " \t\n\x00") {
		return fmt.Errorf("management device %.64q: use a name such as \"vduse\" or \"pci/0000:65:00.2\": %w", s, errs.ErrInvalid)
	}
	return nil
}
