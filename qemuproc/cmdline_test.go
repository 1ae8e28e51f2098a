package qemuproc

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// argsFile reads a libvirt tests/qemuxmlconfdata *.args file (libvirt's
// expected QEMU command lines; boot-network.x86_64-latest.args at libvirt
// 6eaf3614) into argv: the environment assignments before the binary are
// dropped, single quotes are shell quotes.
func argsFile(t testing.TB, name string) []string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), "\\\n", " ")
	var argv []string
	var cur strings.Builder
	in, have := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			in, have = !in, true
		case !in && (r == ' ' || r == '\n'):
			if have {
				argv = append(argv, cur.String())
			}
			cur.Reset()
			have = false
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		argv = append(argv, cur.String())
	}
	for len(argv) > 0 && !strings.HasPrefix(argv[0], "/") {
		argv = argv[1:]
	}
	return argv
}

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want Cmdline
	}{{
		name: "libvirt's fd monitor (qemuxmlconfdata boot-network, libvirt 6eaf3614)",
		argv: argsFile(t, "testdata/libvirt-boot-network.x86_64-latest.args"),
		want: Cmdline{Binary: "/usr/bin/qemu-system-x86_64", Name: "QEMUGuest1", UUID: "c7a5fdbd-edaf-9455-926a-d65c16db1809", Monitors: []Monitor{{
			Option: "-mon", Chardev: "charmonitor", FD: "1729", Server: true, Libvirt: true,
			Unusable: "libvirt's monitor (inherited fd 1729): the VM is libvirt's",
		}}},
	}, {
		// libvirt before it passed the socket as an fd (seen in a
		// Fedora 28 talk's command line): a path, but libvirtd holds it.
		name: "libvirt's path monitor, old boolean shorthand",
		argv: strings.Fields("/usr/bin/qemu-kvm -name guest=fedora28,debug-threads=on -S -no-user-config -nodefaults " +
			"-chardev socket,id=charmonitor,path=/var/lib/libvirt/qemu/domain-41-fedora28/monitor.sock,server,nowait " +
			"-mon chardev=charmonitor,id=monitor,mode=control -rtc base=utc,driftfix=slew"),
		want: Cmdline{Binary: "/usr/bin/qemu-kvm", Name: "fedora28", Monitors: []Monitor{{
			Option: "-mon", Chardev: "charmonitor", Path: "/var/lib/libvirt/qemu/domain-41-fedora28/monitor.sock", Server: true, Libvirt: true,
			Unusable: "libvirt's monitor: libvirtd holds its one connection while the VM runs",
		}}},
	}, {
		// OpenStack nova through libvirt: -name without guest=.
		name: "nova instance name",
		argv: strings.Fields("/usr/bin/qemu-system-x86_64 -name instance-0000001a -S " +
			"-chardev socket,id=charmonitor,path=/var/lib/libvirt/qemu/instance-0000001a.monitor,server,nowait " +
			"-mon chardev=charmonitor,id=monitor,mode=control"),
		want: Cmdline{Binary: "/usr/bin/qemu-system-x86_64", Name: "instance-0000001a", Monitors: []Monitor{{
			Option: "-mon", Chardev: "charmonitor", Path: "/var/lib/libvirt/qemu/instance-0000001a.monitor", Server: true, Libvirt: true,
			Unusable: "libvirt's monitor: libvirtd holds its one connection while the VM runs",
		}}},
	}, {
		// QEMU's docs (docs/interop/qmp-intro.rst, qemu-options.hx).
		name: "QEMU docs: -qmp unix and tcp, a pretty -mon on a tcp chardev",
		argv: []string{"qemu-system-x86_64", "-qmp", "unix:./qmp-sock,server=on,wait=off",
			"-qmp", "tcp:localhost:4444,server=on,wait=off",
			"-chardev", "socket,id=mon1,host=localhost,port=4444,server=on,wait=off",
			"-mon", "chardev=mon1,mode=control,pretty=on"},
		want: Cmdline{Binary: "qemu-system-x86_64", Monitors: []Monitor{
			{Option: "-qmp", Path: "./qmp-sock", Server: true},
			{Option: "-qmp", Unusable: "tcp monitor: fds can be passed only over a unix socket"},
			{Option: "-mon", Chardev: "mon1", Server: true, Unusable: "a TCP socket: fds can be passed only over a unix socket"},
		}},
	}, {
		name: "doubled commas, --options, -qmp-pretty, a readline -mon, -mon before its -chardev, a client socket, -qmp chardev:ID",
		argv: []string{"/opt/bin/qemu-system-aarch64", "--name", "guest=a,,b,debug-threads=on",
			"-mon", "mon0,mode=control", "-mon", "chardev=hmp", "-chardev", "socket,id=hmp,path=/hmp",
			"-chardev", "socket,id=mon0,path=/run/vm/a,,b.qmp,server=on,wait=off",
			"--qmp-pretty", "unix:/run/p.sock,server", "-qmp", "unix:/run/client.sock",
			"-qmp", "chardev:c2", "-chardev", "socket,id=c2,path=/run/c2.sock,server=on,wait=off"},
		want: Cmdline{Binary: "/opt/bin/qemu-system-aarch64", Name: "a,b", Monitors: []Monitor{
			{Option: "-qmp-pretty", Path: "/run/p.sock", Server: true},
			{Option: "-qmp", Path: "/run/client.sock", Unusable: "QEMU connects out to this socket (no server=on): whoever listens there holds the monitor"},
			{Option: "-mon", Chardev: "mon0", Path: "/run/vm/a,b.qmp", Server: true},
			{Option: "-qmp", Chardev: "c2", Path: "/run/c2.sock", Server: true},
		}},
	}, {
		name: "abstract socket, -name with process=, the last -name wins, -chroot, -daemonize",
		argv: []string{"qemu-kvm", "-name", "first", "-name", "web1,process=qemu-web1", "-daemonize", "-chroot", "/srv/jail",
			"-chardev", "socket,id=m,path=netctl-qmp,abstract=on,server=on,wait=off", "-mon", "m,mode=control",
			"-mon", "chardev=gone,mode=control", "-chardev", "stdio,id=s", "-mon", "s,mode=control", "-qmp", "stdio"},
		want: Cmdline{Binary: "qemu-kvm", Name: "web1", Chroot: "/srv/jail", Daemonize: true, Monitors: []Monitor{
			{Option: "-qmp", Unusable: `"stdio" is not a socket`},
			{Option: "-mon", Chardev: "m", Path: "netctl-qmp", Abstract: true, Server: true},
			{Option: "-mon", Chardev: "gone", Unusable: `no -chardev with id "gone"`},
			{Option: "-mon", Chardev: "s", Unusable: `chardev backend "stdio" is not a socket`},
		}},
	}, {
		name: "-run-with chroot, an option without its value at the end",
		argv: []string{"qemu-system-x86_64", "-run-with", "chroot=/jail,user=qemu", "-name"},
		want: Cmdline{Binary: "qemu-system-x86_64", Chroot: "/jail"},
	}, {
		name: "QEMU refuses a JSON -chardev (QEMU 7.2 reads it as QemuOpts): no monitor",
		argv: []string{"qemu-system-x86_64", "-chardev", `{"backend":"socket","id":"m","path":"/x","server":true}`, "-mon", `{"chardev":"m","mode":"control"}`},
		want: Cmdline{Binary: "qemu-system-x86_64"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCmdline(tt.argv)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseCmdline:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseCmdlineRefuses(t *testing.T) {
	for _, argv := range [][]string{nil, {"/usr/bin/socat", "-qmp", "unix:/x,server"}, {"qemu-img", "info"}} {
		if _, err := ParseCmdline(argv); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseCmdline(%q) = %v, want ErrInvalid", argv, err)
		}
	}
}

func TestIsQEMU(t *testing.T) {
	for name, want := range map[string]bool{
		"/usr/bin/qemu-system-x86_64": true, "qemu-system-aarch64": true, "/usr/libexec/qemu-kvm": true,
		"qemu-kvm-wrapper": false, "/usr/bin/qemu-img": false, "qemu-x86_64": false, "": false, "/qemu-system-x86_64/sh": false,
	} {
		if got := IsQEMU(name); got != want {
			t.Errorf("IsQEMU(%q) = %v", name, got)
		}
	}
}

func TestSplitCmdline(t *testing.T) {
	args, cut := SplitCmdline([]byte("qemu-system-x86_64\x00-name\x00a b\x00\x00-S\x00"))
	if want := []string{"qemu-system-x86_64", "-name", "a b", "", "-S"}; !reflect.DeepEqual(args, want) || cut {
		t.Errorf("SplitCmdline = %q, %v; want %q", args, cut, want)
	}
	if args, cut := SplitCmdline(nil); args != nil || cut {
		t.Errorf("empty: %q %v", args, cut)
	}
	big := []byte(strings.Repeat("x\x00", MaxArgs+10))
	if args, cut := SplitCmdline(big); len(args) != MaxArgs || !cut {
		t.Errorf("%d args: kept %d, cut %v", MaxArgs+10, len(args), cut)
	}
	if args, cut := SplitCmdline(make([]byte, MaxCmdline+5)); !cut || len(args) > MaxArgs {
		t.Errorf("over MaxCmdline: cut %v, %d args", cut, len(args))
	}
}

func TestParseStatStartTime(t *testing.T) {
	// A real line of a QEMU on this host's kernel (6.1), comm with a space
	// and a ')' added to check the field count starts after the last ')'.
	line := "4242 (qemu-system-x86) S 1 4242 4242 0 -1 4194560 5939 0 0 0 9 10 0 0 20 0 5 0 98765432 1234567168 12000 18446744073709551615 1 1 0 0 0 0 0 4096 17003 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	if st, err := ParseStatStartTime([]byte(line)); err != nil || st != 98765432 {
		t.Errorf("starttime = %d, %v", st, err)
	}
	odd := strings.Replace(line, "(qemu-system-x86)", "(a) b) c)", 1)
	if st, err := ParseStatStartTime([]byte(odd)); err != nil || st != 98765432 {
		t.Errorf("odd comm: starttime = %d, %v", st, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", strings.Replace(line, "98765432", "-1", 1)} {
		if _, err := ParseStatStartTime([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseStatStartTime(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestPick(t *testing.T) {
	vms := []VM{{PID: 10, Name: "web1"}, {PID: 11, Name: "db"}, {PID: 12, Name: "db"}, {PID: 13}}
	if vm, err := pick(vms, "web1"); err != nil || vm.PID != 10 {
		t.Errorf("web1: %+v %v", vm, err)
	}
	_, err := pick(vms, "db")
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "pids 11, 12") || !strings.Contains(err.Error(), "--qmp") {
		t.Errorf("two named db: %v", err)
	}
	_, err = pick(vms, "mail")
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), `"web1" (pid 10), "db" (pid 11), "db" (pid 12), unnamed (pid 13)`) {
		t.Errorf("not found: %v", err)
	}
	if _, err = pick(nil, "mail"); !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "no QEMU") {
		t.Errorf("none running: %v", err)
	}
	if _, err := Find(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("Find(\"\") = %v", err)
	}
}
