package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDir is the root directory the CLI uses unless NETCTL_RUN_DIR
// names another.
const DefaultDir = "/run/netctl"

// MaxRecords bounds how many records List reads.
const MaxRecords = 4096

// Store is the record directory. The zero value is not usable: use Open.
type Store struct {
	Dir string // the root: DefaultDir, or a test's directory
}

// Open makes sure the root and its subdirectories exist (mode 0700) and
// returns the store.
func Open(dir string) (*Store, error) {
	if dir == "" {
		dir = DefaultDir
	}
	for _, d := range []string{dir, filepath.Join(dir, "nics"), filepath.Join(dir, "locks")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("state: %w (netctl keeps its records there: run as root, or set NETCTL_RUN_DIR to a writable directory)", err)
		}
	}
	return &Store{Dir: dir}, nil
}

// VMKey is a VM's name as a file-name part: the name itself when it is
// at most 64 letters, digits, '-', '_' and '.' (not leading) and does not
// start with "x-" or "sock-", else "x-" and the first 32 hex digits of its
// SHA-256. The prefixes are hashed too so that no name is keyed like
// another name's digest or a socket's key (KeyFor): the key of one VM is
// never the key of another. It never holds '@' (the separator of a record
// file's name).
func VMKey(name string) string {
	if literalKey(name) && !strings.HasPrefix(name, "x-") && !strings.HasPrefix(name, "sock-") {
		return name
	}
	return "x-" + digest(name)
}

// legacyVMKey is VMKey before names starting "x-" or "sock-" were hashed:
// only to find records written by an older netctl.
func legacyVMKey(name string) string {
	if literalKey(name) {
		return name
	}
	return "x-" + digest(name)
}

func literalKey(name string) bool {
	ok := name != "" && len(name) <= 64 && name[0] != '.' && name[0] != '-'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
	}
	return ok
}

// KeyFor is the key of the VM that a record (or an attach) is about: its
// name, or for a VM without one, its QMP socket.
func KeyFor(vm, qmpSocket string) string {
	if vm != "" {
		return VMKey(vm)
	}
	return "sock-" + digest(filepath.Clean(qmpSocket))
}

func legacyKeyFor(vm, qmpSocket string) string {
	if vm != "" {
		return legacyVMKey(vm)
	}
	return KeyFor(vm, qmpSocket)
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

// LockKey is the key of the lock for the VM behind a QMP socket: attach
// and detach take it before they connect, since QEMU serves one QMP
// connection at a time.
func LockKey(qmpSocket string) string { return KeyFor("", qmpSocket) }

// recordName is the file name of a record: KEY@ID.json. Neither a key
// (VMKey, KeyFor) nor an id (CheckID) holds '@', so the name is one VM's
// and one id's alone. Older netctl wrote KEY.ID.json (legacyName), which
// two VMs could share (VM "a" id "b.net1", VM "a.b" id "net1"); such files
// are still read, and each is checked to be the record asked for.
func recordName(key, id string) string { return key + "@" + id + ".json" }

func legacyName(key, id string) string { return key + "." + id + ".json" }

func (s *Store) recordPath(key, id string) string {
	return filepath.Join(s.Dir, "nics", recordName(key, id))
}

func (s *Store) legacyPath(key, id string) string {
	return filepath.Join(s.Dir, "nics", legacyName(key, id))
}

// Lock is a held per-VM lock; it owns the lock file's fd until Unlock.
type Lock struct{ f *os.File }

// Unlock releases the lock (closing its fd). Unlocking twice is harmless.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing drops the flock
	l.f = nil
	return err
}

// Lock takes the lock of the VM with key (LockKey), waiting until it is
// free or ctx ends.
//
// The lock file may be removed (RemoveLock, by netctl gc) while Lock
// waits: RemoveLock unlinks it only while holding its flock, and Lock,
// once it has the flock, checks that its fd is still the file at the
// path (same device and inode). If it is not, another process may by now
// hold a new file's lock, so Lock closes the old one and starts again.
// Two holders of one key therefore never overlap.
func (s *Store) Lock(ctx context.Context, key string) (*Lock, error) {
	p := s.lockPath(key)
	for {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("state: lock %s: %w", p, err)
		}
		if err := waitFlock(ctx, f, p); err != nil {
			f.Close()
			return nil, err
		}
		if sameFile(f, p) {
			return &Lock{f: f}, nil
		}
		f.Close() // removed (or replaced) while this waited: take the new one
	}
}

func (s *Store) lockPath(key string) string { return filepath.Join(s.Dir, "locks", key+".lock") }

// waitFlock takes f's exclusive flock, waiting until ctx ends.
func waitFlock(ctx context.Context, f *os.File, p string) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("state: lock %s: %w", p, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("state: lock %s: another netctl is attaching or detaching on this VM: %w", p, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sameFile says whether the open file f is still the file at path p.
func sameFile(f *os.File, p string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Lstat(p, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// LockKeys lists the keys of the lock files under locks/ (at most
// MaxRecords, sorted).
func (s *Store) LockKeys() ([]string, error) {
	es, err := os.ReadDir(filepath.Join(s.Dir, "locks"))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	var keys []string
	for _, e := range es {
		k, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || k == "" || strings.HasPrefix(k, ".") || !e.Type().IsRegular() {
			continue
		}
		keys = append(keys, k)
		if len(keys) == MaxRecords {
			break
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// RemoveLock removes the lock file of key when nobody holds it, and says
// whether it did. It takes the file's flock without waiting (held: false,
// nil) and unlinks the path while holding it; a Lock that opened the old
// file meanwhile sees it is no longer at the path and takes a new one (see
// Lock), so removing never lets two holders overlap. dryRun only checks.
// A lock file that is not there is (false, nil).
func (s *Store) RemoveLock(key string, dryRun bool) (bool, error) {
	if key == "" || strings.ContainsAny(key, "/") || strings.HasPrefix(key, ".") {
		return false, fmt.Errorf("state: lock key %.64q: %w", key, ErrInvalid)
	}
	p := s.lockPath(key)
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("state: lock %s: %w", p, err)
	}
	defer f.Close() // drops the flock, after the unlink
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, fmt.Errorf("state: lock %s: %w", p, err)
	}
	if !sameFile(f, p) {
		return false, nil // replaced meanwhile: that one may be in use
	}
	if dryRun {
		return true, nil
	}
	if err := os.Remove(p); err != nil {
		return false, fmt.Errorf("state: remove %s: %w", p, err)
	}
	syncDir(filepath.Join(s.Dir, "locks"))
	return true, nil
}

// Save writes the record atomically (temporary file, fsync, rename, fsync
// of the directory), replacing an earlier one with the same VM and id.
// The caller holds the VM's lock.
func (s *Store) Save(n *NIC) error { return s.save(n, true) }

// Stage is Save without the two fsyncs, for the records an attach writes
// before each thing it creates: the rename makes each visible to every
// other process at once, whatever happens to this one, which is what
// they are for (a killed attach leaves a record naming all that may
// exist). Only a crash of the machine could lose one, and that takes the
// taps, devices and QEMUs it names with it (the default state directory,
// /run/netctl, does not outlive a boot either). The attach's last record
// is written with Save.
func (s *Store) Stage(n *NIC) error { return s.save(n, false) }

func (s *Store) save(n *NIC, durable bool) error {
	if err := n.Validate(); err != nil {
		return fmt.Errorf("state: not saving an invalid record: %w", err)
	}
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return fmt.Errorf("state: encode: %w", err)
	}
	key := n.Key()
	if err := writeAtomic(filepath.Join(s.Dir, "nics"), s.recordPath(key, n.ID), append(b, '\n'), durable); err != nil {
		return err
	}
	// The record is now under its own name: an older netctl's file of the
	// same NIC would list it twice.
	return s.removeLegacy(s.legacyPath(n.legacyKey(), n.ID), key, n.ID)
}

// Create writes a new record like Stage (not synced: it is an attach's
// intent record, see Stage), but only if the VM has no record of that id
// yet: ErrExists otherwise, and the file is left as it was. Two writers
// that both found no record (an attach through each of two QMP sockets of
// one VM: their locks differ) thus get one winner.
func (s *Store) Create(n *NIC) error {
	if err := n.Validate(); err != nil {
		return fmt.Errorf("state: not saving an invalid record: %w", err)
	}
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return fmt.Errorf("state: encode: %w", err)
	}
	dir := filepath.Join(s.Dir, "nics")
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("state: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("state: close %s: %w", tmp.Name(), err)
	}
	final := s.recordPath(n.Key(), n.ID)
	if err := os.Link(tmp.Name(), final); err != nil { // link, unlike rename, never replaces
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("state: %s: a record of NIC %s on this VM was written meanwhile: %w", final, n.ID, ErrExists)
		}
		return fmt.Errorf("state: link to %s: %w", final, err)
	}
	return nil
}

// ErrExists: Create found a record of that NIC.
var ErrExists = errors.New("a record of that NIC exists")

// removeLegacy removes the old-format file p if it holds the record of
// NIC id on the VM with key, and leaves it alone if it holds another's.
func (s *Store) removeLegacy(p, key, id string) error {
	r, err := readRecord(p)
	if err != nil || r.Key() != key || r.ID != id {
		return nil // none, unreadable (List reports it), or another VM's
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: %w", err)
	}
	syncDir(filepath.Join(s.Dir, "nics"))
	return nil
}

// writeAtomic writes b to final (in dir) through a temporary file and a
// rename, so a reader sees the old content or the new, never a part;
// with durable, the file and the directory are synced first (a record
// must survive a crash; a cache need not).
func writeAtomic(dir, final string, b []byte, durable bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("state: write %s: %w", tmp.Name(), err)
	}
	if durable {
		if err := syncFile(tmp); err != nil {
			return fmt.Errorf("state: fsync %s: %w", tmp.Name(), err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("state: close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("state: rename to %s: %w", final, err)
	}
	ok = true
	if durable {
		syncDir(dir)
	}
	return nil
}

// syncFile is f.Sync (tests count the calls).
var syncFile = (*os.File).Sync

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		syncFile(d)
		d.Close()
	}
}

// Remove deletes the record of NIC id on the VM with key; a record that
// is not there is not an error.
func (s *Store) Remove(key, id string) error {
	if err := CheckID(id); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if err := os.Remove(s.recordPath(key, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: %w", err)
	}
	syncDir(filepath.Join(s.Dir, "nics"))
	if _, p := s.findRekeyedLegacy(key, id); p != "" {
		if err := s.removeLegacy(p, key, id); err != nil {
			return err
		}
	}
	return s.removeLegacy(s.legacyPath(key, id), key, id)
}

// findRekeyedLegacy finds the old-format file of NIC id on the VM with
// key when the older netctl keyed that VM otherwise: names starting "x-"
// or "sock-" were keys of their own then (legacyVMKey) and are hashed now
// (VMKey), so the file is NAME.ID.json, which key does not name. It reads
// the old-format files that end in .ID.json and returns the one that holds
// that NIC, with its path, or nil and "".
func (s *Store) findRekeyedLegacy(key, id string) (*NIC, string) {
	if !strings.HasPrefix(key, "x-") {
		return nil, ""
	}
	dir := filepath.Join(s.Dir, "nics")
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, ""
	}
	seen := 0
	for _, e := range es {
		name := e.Name()
		if strings.Contains(name, "@") || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, "."+id+".json") ||
			!(strings.HasPrefix(name, "x-") || strings.HasPrefix(name, "sock-")) {
			continue
		}
		if seen++; seen > MaxRecords {
			break
		}
		p := filepath.Join(dir, name)
		if n, err := readRecord(p); err == nil && n.Key() == key && n.ID == id && legacyName(n.legacyKey(), n.ID) == name {
			return n, p
		}
	}
	return nil, ""
}

// ErrNotFound: no record of that NIC.
var ErrNotFound = errors.New("no such NIC record")

// Load reads the record of NIC id on the VM with key; ErrNotFound when
// there is none.
func (s *Store) Load(key, id string) (*NIC, error) {
	if err := CheckID(id); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	p := s.recordPath(key, id)
	n, err := readRecord(p)
	if errors.Is(err, ErrNotFound) {
		// An older netctl's file: its name may be another VM's too.
		lp := s.legacyPath(key, id)
		n, err = readRecord(lp)
		if err == nil && (n.Key() != key || n.ID != id) {
			return nil, fmt.Errorf("state: %s holds VM %.64q's NIC %q, not %q of %s: %w", lp, n.VM, n.ID, id, key, ErrNotFound)
		}
		if errors.Is(err, ErrNotFound) {
			if n, _ := s.findRekeyedLegacy(key, id); n != nil {
				return n, nil
			}
		}
		return n, err
	}
	if err != nil {
		return nil, err
	}
	if n.Key() != key || n.ID != id {
		return nil, fmt.Errorf("state: %s holds VM %.64q's NIC %q, not %q of %s (remove the file if no NIC needs it): %w", p, n.VM, n.ID, id, key, ErrInvalid)
	}
	return n, nil
}

// readFile reads one of the store's files, which are untrusted: no
// symlink is followed, and at most max+1 bytes are read (the parsers
// refuse more). A missing file is ErrNotFound.
// readFile reads p, a regular file, to EOF (at most max+1 bytes). What is
// not a regular file is not opened: opening a device node can change what
// it drives (a vhost-vdpa node's open resets its device), a FIFO's can
// wait. (List and Buses, which read many, check the type readdir gives.)
func readFile(p string, max int64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("state: %s: not a regular file (mode %#o): remove it if no NIC needs it", p, st.Mode&unix.S_IFMT)
	}
	return readFileAt(unix.AT_FDCWD, "", p, max)
}

// readFileAt is readFile of name in the directory open as dirfd (dir is
// its path, for messages): a reader on another thread reads the
// directory its caller opened, whatever that thread's mount namespace.
func readFileAt(dirfd int, dir, name string, max int64) ([]byte, error) {
	// Plain syscalls (open, read to EOF, close): os.Open would also set
	// the fd non-blocking and try the poller, three more syscalls a
	// record, and List reads every record of a VM.
	p := filepath.Join(dir, name)
	var fd int
	var err error
	for {
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0) // NONBLOCK: a FIFO put here does not hang the reader
		if err != unix.EINTR {
			break
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("state: %s: %w", p, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("state: open %s: %w", p, err)
	}
	defer unix.Close(fd)
	b := make([]byte, 0, min(4096, max+1))
	for int64(len(b)) <= max {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(int(max+1)-len(b), cap(b)))
		}
		n, err := unix.Read(fd, b[len(b):min(cap(b), int(max+1))])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("state: read %s: %w", p, err)
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
	}
	return b, nil
}

// readRecord reads the record at p (not opened unless a regular file).
func readRecord(p string) (*NIC, error) {
	b, err := readFile(p, MaxRecordSize)
	return parseRecord(p, b, err)
}

// readRecordAt reads the record name in dirfd (List: readdir said it is a
// regular file).
func readRecordAt(dirfd int, dir, name string) (*NIC, error) {
	b, err := readFileAt(dirfd, dir, name, MaxRecordSize)
	return parseRecord(filepath.Join(dir, name), b, err)
}

func parseRecord(p string, b []byte, err error) (*NIC, error) {
	if err != nil {
		return nil, err
	}
	n, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("state: %s: %w (remove the file if no NIC needs it)", p, err)
	}
	return n, nil
}

// readRecords reads dir's files names, in parallel when there are many
// (inParallel), through a descriptor of dir opened on the caller's thread.
func readRecords(dir string, names []string) ([]*NIC, []error) {
	recs, errs := make([]*NIC, len(names)), make([]error, len(names))
	err := withDir(dir, func(dirfd int) {
		inParallel(len(names), func(i int) { recs[i], errs[i] = readRecordAt(dirfd, dir, names[i]) })
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return recs, errs
}

// withDir runs f with a descriptor of dir, opened on the calling thread:
// readers that f starts on other threads (inParallel) then read the
// directory the caller sees, even when the caller's thread has a mount
// namespace of its own.
func withDir(dir string, f func(dirfd int)) error {
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("state: open %s: %w", dir, err)
	}
	defer unix.Close(dirfd)
	f(dirfd)
	return nil
}

// inParallel runs f(0) to f(n-1) on up to 4 goroutines when n is large
// (a VM with 64 NICs has 64 records, and attach reads them to order the
// root ports it tries), else in turn.
func inParallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), 4, n/8)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// List reads every record, or those of the VM with key (""
// for all), sorted by VM key and id. A file that cannot be read or is not
// a valid record under its own name is reported in bad (its error names
// the file) and skipped. Old-format files (KEY.ID.json) are read too; one
// that names the same NIC as a current file is passed by.
func (s *Store) List(key string) (nics []*NIC, bad []error, err error) {
	dir := filepath.Join(s.Dir, "nics")
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("state: %w", err)
	}
	var names []string
	for _, e := range es {
		n := e.Name()
		if !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			continue
		}
		if key != "" && strings.Contains(n, "@") && !strings.HasPrefix(n, key+"@") {
			continue // an old-format name says nothing sure: read it
		}
		if !e.Type().IsRegular() {
			// Not opened: opening a device node (a vhost-vdpa node resets
			// its device) or a FIFO can change or wait on what netctl
			// does not manage.
			bad = append(bad, fmt.Errorf("state: %s: not a regular file (%v): remove it if no NIC needs it", filepath.Join(dir, n), e.Type()))
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > MaxRecords {
		bad = append(bad, fmt.Errorf("state: %s holds %d records; reading the first %d", dir, len(names), MaxRecords))
		names = names[:MaxRecords]
	}
	type nicKey struct{ key, id string }
	seen := map[nicKey]bool{}
	var legacy []*NIC
	recs, errs := readRecords(dir, names)
	for i, n := range names {
		p := filepath.Join(dir, n)
		r, err := recs[i], errs[i]
		if err != nil {
			bad = append(bad, err)
			continue
		}
		k := r.Key()
		current := strings.Contains(n, "@")
		want := recordName(k, r.ID)
		if !current {
			want = legacyName(r.legacyKey(), r.ID)
		}
		if want != n {
			bad = append(bad, fmt.Errorf("state: %s: the record is for %s (remove the file if no NIC needs it): %w", p, recordName(k, r.ID), ErrInvalid))
			continue
		}
		if key != "" && k != key {
			continue
		}
		if !current {
			legacy = append(legacy, r)
			continue
		}
		seen[nicKey{k, r.ID}] = true
		nics = append(nics, r)
	}
	for _, r := range legacy {
		if !seen[nicKey{r.Key(), r.ID}] {
			nics = append(nics, r)
		}
	}
	sort.SliceStable(nics, func(i, j int) bool {
		ki, kj := nics[i].Key(), nics[j].Key()
		if ki != kj {
			return ki < kj
		}
		return nics[i].ID < nics[j].ID
	})
	return nics, bad, nil
}
