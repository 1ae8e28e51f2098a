package state

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func saveNth(t testing.TB, s *Store, i int, edit func(*NIC)) {
	n := sample()
	n.ID = fmt.Sprintf("net%04d", i)
	n.Netdev = "netctl-" + n.ID
	n.Properties = map[string]string{"bus": fmt.Sprintf("rp%d", i)}
	if edit != nil {
		edit(n)
	}
	if err := s.Save(n); err != nil {
		t.Fatal(err)
	}
}

// List on 4 goroutines gives what it gives on one: same records, same
// order, same bad files in the same order, with every kind of bad file.
func TestListParallelMatchesSequential(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		saveNth(t, s, i, nil)
	}
	key := sample().Key()
	dir := filepath.Join(s.Dir, "nics")
	b, _ := os.ReadFile(filepath.Join(dir, recordName(key, "net0001")))
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, recordName(key, "misnamed")), b, 0o600))
	must(os.WriteFile(filepath.Join(dir, recordName(key, "junk")), []byte("{"), 0o600))
	must(os.WriteFile(filepath.Join(dir, recordName(key, "huge")), make([]byte, MaxRecordSize+100), 0o600))
	must(os.Symlink(filepath.Join(dir, recordName(key, "net0002")), filepath.Join(dir, recordName(key, "link"))))
	must(os.Mkdir(filepath.Join(dir, recordName(key, "adir")), 0o700))
	must(unix.Mkfifo(filepath.Join(dir, recordName(key, "fifo")), 0o600))
	must(unix.Mkfifo(filepath.Join(dir, recordName(key, "fifow")), 0o600))
	// a writer holds fifow open and writes nothing
	wfd, err := unix.Open(filepath.Join(dir, recordName(key, "fifow")), unix.O_RDWR|unix.O_NONBLOCK, 0)
	must(err)
	defer unix.Close(wfd)
	ln, err := net.Listen("unix", filepath.Join(dir, recordName(key, "sock")))
	must(err)
	defer ln.Close()
	must(os.WriteFile(filepath.Join(dir, legacyName(key, "net0003")), b, 0o600))

	done := make(chan struct{})
	var par, seq []*NIC
	var pbad, sbad []error
	go func() {
		defer close(done)
		var err error
		par, pbad, err = s.List(key)
		must(err)
		old := runtime.GOMAXPROCS(1)
		seq, sbad, err = s.List(key)
		runtime.GOMAXPROCS(old)
		must(err)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("List hung")
	}
	if !reflect.DeepEqual(par, seq) {
		t.Fatalf("parallel List differs from sequential: %d vs %d records", len(par), len(seq))
	}
	ps, ss := fmt.Sprint(pbad), fmt.Sprint(sbad)
	if ps != ss {
		t.Fatalf("bad differs:\n%s\n%s", ps, ss)
	}
	for _, e := range pbad {
		t.Log(e)
	}
	if len(par) != 200 {
		t.Fatalf("%d records", len(par))
	}
	got := s.Buses(key, sample().QEMUPID, sample().QEMUStart)
	if len(got) != 200 {
		t.Fatalf("Buses: %d", len(got))
	}
}

// Save (and Remove) racing with List and Buses: no data race, no bad file,
// no record lost from List.
func TestConcurrentSaveWhileListing(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 64; i++ {
		saveNth(t, s, i, nil)
	}
	key := sample().Key()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (j*4 + w) % 64
				saveNth(t, s, i, func(n *NIC) {
					if j%2 == 1 {
						n.Status = StatusDetaching
					}
				})
			}
		}()
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		nics, bad, err := s.List(key)
		if err != nil || len(bad) != 0 || len(nics) != 64 {
			close(stop)
			wg.Wait()
			t.Fatalf("List during Save: %d records, bad %v, %v", len(nics), bad, err)
		}
		if b := s.Buses(key, sample().QEMUPID, sample().QEMUStart); len(b) > 64 {
			t.Fatalf("Buses: %d", len(b))
		}
	}
	close(stop)
	wg.Wait()
}

// A directory of 5000 records of one VM: List reports the bound and reads
// 4096; Buses reads at most 4096; neither hangs.
func TestFiveThousand(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := sample()
	n.Properties = map[string]string{"bus": "rp"}
	n.ID = "net0"
	dir := filepath.Join(s.Dir, "nics")
	for i := 0; i < 5000; i++ {
		n.ID = fmt.Sprintf("n%04d", i)
		n.Netdev = "netctl-" + n.ID
		if err := s.Stage(n); err != nil {
			t.Fatal(err)
		}
	}
	_ = dir
	nics, bad, err := s.List(n.Key())
	if err != nil || len(nics) != MaxRecords || len(bad) != 1 {
		t.Fatalf("List: %d records, %d bad, %v", len(nics), len(bad), err)
	}
	if b := s.Buses(n.Key(), n.QEMUPID, n.QEMUStart); len(b) != MaxRecords {
		t.Fatalf("Buses: %d", len(b))
	}
}

// Buses passes by a file that is not a record of key under its own name:
// a record of VM web2 put under web1's name for it (web1@net5.json, id
// net5) is not web1's record (List reports it bad), and Buses does not
// take its bus (it once decoded no VM or QMP field).
func TestBusesTakesAnotherVMsRecord(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	saveNth(t, s, 5, func(n *NIC) { n.VM, n.ID, n.Netdev = "web2", "net5", "netctl-net5" })
	dir := filepath.Join(s.Dir, "nics")
	b, err := os.ReadFile(filepath.Join(dir, recordName(VMKey("web2"), "net5")))
	if err != nil {
		t.Fatal(err)
	}
	key := sample().Key() // web1
	if err := os.WriteFile(filepath.Join(dir, recordName(key, "net5")), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, bad, _ := s.List(key); len(bad) != 1 {
		t.Fatalf("List: bad %v, want the misplaced file reported", bad)
	}
	if got := s.Buses(key, sample().QEMUPID, sample().QEMUStart); len(got) != 0 {
		t.Fatalf("Buses of web1 = %v: took web2's record", got)
	}
}
