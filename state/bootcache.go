package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MaxBootCache bounds a boot cache file read back.
const MaxBootCache = 64 << 10

// bootIDFile is where the kernel names this boot (a random UUID, new at
// every boot); tests point it elsewhere.
var bootIDFile = "/proc/sys/kernel/random/boot_id"

// BootID is this boot's id (/proc/sys/kernel/random/boot_id).
func BootID() (string, error) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return "", fmt.Errorf("state: boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if !IsUUID(id) {
		return "", fmt.Errorf("state: boot id %.40q is not a UUID: %w", id, ErrInvalid)
	}
	return id, nil
}

// bootCache is the file: the boot it holds for, and the value.
type bootCache struct {
	BootID string          `json:"boot_id"`
	Value  json.RawMessage `json:"value"`
}

func (s *Store) bootCachePath(name string) (string, error) {
	if !IsQEMUID(name, maxID) {
		return "", fmt.Errorf("state: boot cache name %.40q: %w", name, ErrInvalid)
	}
	return filepath.Join(s.Dir, "cache", name+".json"), nil
}

// LoadBootCache reads the value SaveBootCache kept under name into v, if
// it was kept during this boot of the host; false (and v untouched) when
// there is none, it is from another boot, or it does not decode into v
// (a value from an older netctl). The file is untrusted: bounded in size
// and decoded strictly; the caller validates the value itself.
func (s *Store) LoadBootCache(name string, v any) (bool, error) {
	path, err := s.bootCachePath(name)
	if err != nil {
		return false, err
	}
	id, err := BootID()
	if err != nil {
		return false, err
	}
	b, err := readFile(path, MaxBootCache)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(b) > MaxBootCache {
		return false, nil
	}
	var c bootCache
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if d.Decode(&c) != nil || c.BootID != id {
		return false, nil
	}
	d = json.NewDecoder(bytes.NewReader(c.Value))
	d.DisallowUnknownFields()
	if d.Decode(v) != nil {
		return false, nil
	}
	return true, nil
}

// SaveBootCache keeps v under name for the rest of this boot (what
// depends only on the running kernel: the tap's offloads), written
// atomically under Dir/cache.
func (s *Store) SaveBootCache(name string, v any) error {
	path, err := s.bootCachePath(name)
	if err != nil {
		return err
	}
	id, err := BootID()
	if err != nil {
		return err
	}
	val, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("state: encode %s: %w", name, err)
	}
	b, err := json.Marshal(bootCache{BootID: id, Value: val})
	if err != nil || len(b) > MaxBootCache {
		return fmt.Errorf("state: boot cache %s: %d bytes (at most %d) or %v: %w", name, len(b), MaxBootCache, err, ErrInvalid)
	}
	return writeAtomic(filepath.Dir(path), path, append(b, '\n'), false)
}
