package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// DomainSchema names the format of a hook record; ParseDomain refuses any
// other value.
const DomainSchema = "netctl.hook/v1"

// DomainStatus is where a libvirt domain is in the hook's view.
type DomainStatus string

const (
	// DomainPrepared: prepare begin created the host side; QEMU is not up.
	DomainPrepared DomainStatus = "prepared"
	// DomainStarted: started begin (or reconnect begin) saw QEMU up.
	DomainStarted DomainStatus = "started"
)

// HookVDPA is a vdpa device the hook created and the symlink it published.
type HookVDPA struct {
	VDPA
	MAC  string `json:"mac,omitempty"`
	Link string `json:"link,omitempty"` // /run/netctl/vdpa/NAME -> Vhost
	// SysfsIno is the device's identity: the inode of its sysfs
	// directory (kernfs numbers are not reused within a boot), so that a
	// release deletes it only if it is still the device the hook made; 0
	// in a record from before it was kept (then the name decides).
	SysfsIno uint64 `json:"sysfs_ino,omitempty"`
}

// HookTap is a persistent tap the hook created.
type HookTap struct {
	Link
	MAC    string `json:"mac,omitempty"`
	Queues int    `json:"queues,omitempty"`
	Owner  int    `json:"owner"`
	MTU    int    `json:"mtu,omitempty"`
}

// HookInterface is what the hook decided for one interface it manages
// (policy.Decide on this host): the backend, the profile, the features
// offered and why each other one is dropped, and what the domain forces.
type HookInterface struct {
	MAC     string            `json:"mac,omitempty"`
	Kind    string            `json:"kind"` // tap, vdpa or direct
	Name    string            `json:"name"`
	Backend string            `json:"backend"`
	Profile string            `json:"profile"`
	Offer   []string          `json:"offer,omitempty"`
	Forced  []string          `json:"forced,omitempty"`  // "<guest tso4='on'/>", as the domain XML has it
	Dropped map[string]string `json:"dropped,omitempty"` // feature -> why it is not offered
}

// Domain is the record of what the libvirt hook prepared for one domain.
// Only what has Created set is deleted at release.
type Domain struct {
	Schema string       `json:"schema"`
	Name   string       `json:"domain"`
	UUID   string       `json:"uuid,omitempty"`
	Status DomainStatus `json:"status"`
	NetNS  uint64       `json:"netns,omitempty"`
	Taps   []HookTap    `json:"taps,omitempty"`
	VDPAs  []HookVDPA   `json:"vdpas,omitempty"`
	Notes  []string     `json:"notes,omitempty"` // what the guest loses on direct interfaces, and the like
	// Interfaces are the decisions, one per interface the hook manages.
	Interfaces []HookInterface `json:"interfaces,omitempty"`
	Prepared   time.Time       `json:"prepared"`
	Updated    time.Time       `json:"updated"`
}

// MaxDomainNotes bounds the notes of one record.
const MaxDomainNotes = 256

// Validate checks a hook record read from disk or about to be written.
func (d *Domain) Validate() error {
	if d.Schema != DomainSchema {
		return fmt.Errorf("schema %.64q, want %q: %w", d.Schema, DomainSchema, ErrInvalid)
	}
	if d.Name == "" {
		return fmt.Errorf("hook record without a domain name: %w", ErrInvalid)
	}
	if err := CheckDomainName(d.Name); err != nil {
		return err
	}
	switch d.Status {
	case DomainPrepared, DomainStarted:
	default:
		return fmt.Errorf("hook record status %.32q: %w", d.Status, ErrInvalid)
	}
	if len(d.Taps) > 4096 || len(d.VDPAs) > 4096 || len(d.Notes) > MaxDomainNotes || len(d.Interfaces) > 4096 {
		return fmt.Errorf("hook record of %s lists too many devices or notes: %w", d.Name, ErrInvalid)
	}
	for _, it := range d.Interfaces {
		if len(it.Offer) > 64 || len(it.Dropped) > 64 || len(it.Forced) > 64 {
			return fmt.Errorf("hook record of %s: interface %.64q lists over 64 features: %w", d.Name, it.Name, ErrInvalid)
		}
	}
	for i := range d.Taps {
		if err := checkLink("tap", &d.Taps[i].Link); err != nil {
			return err
		}
	}
	for _, v := range d.VDPAs {
		if !isIfname(v.Name) && !vdpaNamePattern(v.Name) {
			return fmt.Errorf("vdpa name %.64q: %w", v.Name, ErrInvalid)
		}
		if v.Link != "" && !strings.HasPrefix(v.Link, "/") {
			return fmt.Errorf("vdpa link %.128q is not absolute: %w", v.Link, ErrInvalid)
		}
	}
	return nil
}

// MaxDomainName bounds a libvirt domain name in a hook record. libvirt
// itself forbids only '/' and newline (and its files NAME.xml bound a
// name at about 250 bytes); the records are keyed by VMKey, which hashes
// any name that is not a plain file name.
const MaxDomainName = 1024

// CheckDomainName refuses a domain name a hook record cannot hold: empty,
// over MaxDomainName bytes, not UTF-8 (JSON would change it), or with a
// NUL.
func CheckDomainName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("an empty domain name: %w", ErrInvalid)
	case len(name) > MaxDomainName:
		return fmt.Errorf("domain name of %d bytes (at most %d): %w", len(name), MaxDomainName, ErrInvalid)
	case !utf8.ValidString(name):
		return fmt.Errorf("domain name %.64q is not UTF-8: %w", name, ErrInvalid)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("domain name %.64q has a NUL: %w", name, ErrInvalid)
	}
	return nil
}

func vdpaNamePattern(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// ParseDomain decodes and validates a hook record.
func ParseDomain(b []byte) (*Domain, error) {
	if len(b) > MaxRecordSize {
		return nil, fmt.Errorf("hook record of %d bytes (at most %d): %w", len(b), MaxRecordSize, ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d Domain
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("hook record: %v: %w", err, ErrInvalid)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

func (s *Store) domainDir() string { return filepath.Join(s.Dir, "hook") }

// domainPath is the hook record's file: VMKEY.json, one domain's alone
// (VMKey never gives two names one key). legacyDomainPath is where an
// older netctl wrote it, which for a name starting "x-" or "sock-" could
// be another domain's (one named "x-" and the digest of the other's name).
func (s *Store) domainPath(name string) string {
	return filepath.Join(s.domainDir(), VMKey(name)+".json")
}

func (s *Store) legacyDomainPath(name string) string {
	return filepath.Join(s.domainDir(), legacyVMKey(name)+".json")
}

// DomainLockKey is the lock key of a libvirt domain's hook record.
func DomainLockKey(name string) string { return "hook-" + VMKey(name) }

// SaveDomain writes the hook record atomically; the caller holds
// DomainLockKey(d.Name).
func (s *Store) SaveDomain(d *Domain) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("state: not saving an invalid hook record: %w", err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("state: encode: %w", err)
	}
	if err := writeAtomic(s.domainDir(), s.domainPath(d.Name), append(b, '\n'), true); err != nil {
		return err
	}
	if lp := s.legacyDomainPath(d.Name); lp != s.domainPath(d.Name) {
		if old, err := readDomain(lp); err == nil && old.Name == d.Name {
			os.Remove(lp) // an older netctl's copy of this domain's record
		}
	}
	return nil
}

// LoadDomain reads the hook record of domain name; ErrNotFound when there
// is none.
// The record read must be that domain's: a file holding another's is an
// error (ErrNotFound for an older netctl's file under a shared name).
func (s *Store) LoadDomain(name string) (*Domain, error) {
	p := s.domainPath(name)
	d, err := readDomain(p)
	if errors.Is(err, ErrNotFound) && s.legacyDomainPath(name) != p {
		p = s.legacyDomainPath(name)
		if d, err = readDomain(p); err == nil && d.Name != name {
			return nil, fmt.Errorf("state: %s holds domain %.64q's hook record, not %.64q's: %w", p, d.Name, name, ErrNotFound)
		}
	}
	if err != nil {
		return nil, err
	}
	if d.Name != name {
		return nil, fmt.Errorf("state: %s holds domain %.64q's hook record, not %.64q's (remove the file if that domain is not running): %w", p, d.Name, name, ErrInvalid)
	}
	return d, nil
}

func readDomain(p string) (*Domain, error) {
	b, err := readFile(p, MaxRecordSize)
	if err != nil {
		return nil, err
	}
	d, err := ParseDomain(b)
	if err != nil {
		return nil, fmt.Errorf("state: %s: %w (remove the file if the domain is not running)", p, err)
	}
	return d, nil
}

// RemoveDomain deletes the hook record of domain name; one that is not
// there is not an error.
func (s *Store) RemoveDomain(name string) error {
	if err := os.Remove(s.domainPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: %w", err)
	}
	if lp := s.legacyDomainPath(name); lp != s.domainPath(name) {
		if d, err := readDomain(lp); err == nil && d.Name == name {
			if err := os.Remove(lp); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("state: %w", err)
			}
		}
	}
	syncDir(s.domainDir())
	return nil
}

// ListDomains reads every hook record, sorted by domain key; unreadable
// files are reported in bad and skipped.
func (s *Store) ListDomains() (ds []*Domain, bad []error, err error) {
	es, err := os.ReadDir(s.domainDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("state: %w", err)
	}
	var names []string
	for _, e := range es {
		if n := e.Name(); strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) > MaxRecords {
		bad = append(bad, fmt.Errorf("state: %s holds %d records; reading the first %d", s.domainDir(), len(names), MaxRecords))
		names = names[:MaxRecords]
	}
	for _, n := range names {
		p := filepath.Join(s.domainDir(), n)
		d, err := readDomain(p)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		if n != VMKey(d.Name)+".json" && n != legacyVMKey(d.Name)+".json" {
			bad = append(bad, fmt.Errorf("state: %s: the hook record is for domain %.64q, whose file is %s.json (remove the file if that domain is not running): %w", p, d.Name, VMKey(d.Name), ErrInvalid))
			continue
		}
		if n != VMKey(d.Name)+".json" {
			if _, err := os.Lstat(s.domainPath(d.Name)); err == nil {
				continue // an older netctl's copy; the current file is listed
			}
		}
		ds = append(ds, d)
	}
	return ds, bad, nil
}
