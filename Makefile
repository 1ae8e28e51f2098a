# netctl: see README.md. Every target runs on a fresh Debian 12 machine as
# root; the VM targets install what they need (test/host-deps.sh) and fetch
# the test kernels into .cache/vm.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
KERNEL ?= all
BIN := $(CURDIR)/bin
export VMEXEC := $(BIN)/netctl-vm
# Packages with tests that must run in the VM (files named *_vm_test.go).
VM_PKGS = $(sort $(patsubst %/,%,$(dir $(shell find . -name '*_vm_test.go' -not -path './.cache/*'))))
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# docs: the man pages (docs/man) and shell completion (completion/), generated
# from the command tree; TestDocsCurrent fails when they are not current.
.PHONY: all build build-netctl proto docs install uninstall deb test test-unit test-host fuzz test-harness test-vm vm-deps vm-prepare lint demo bench clean

all: build

# The version netctl reports (netctl version): the nearest tag, else the
# commit; Go's build info adds the full revision and the dirty flag
# (-buildvcs=auto: a machine's GOFLAGS=-buildvcs=false would drop them).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO_LDFLAGS := -X main.version=$(VERSION)

build: build-netctl
	CGO_ENABLED=0 $(GO) build -o $(BIN)/netctl-vm ./test/cmd/netctl-vm
	CGO_ENABLED=0 $(GO) build -o $(BIN)/netctl-demo ./test/cmd/netctl-demo

# netctl itself, as make install and make deb ship it: bin/netctl without the
# commands that need large libraries (netctl_split: the exporter's Prometheus
# client, the KubeVirt sidecar's gRPC), whose package initialisation every
# hook, CNI and attach call would pay, and bin/netctl-full, every command,
# which netctl runs for those (cmd/netctl/full.go). Neither links urfave/cli's
# markdown and man generators (urfave_cli_no_docs: netctl has its own).
build-netctl:
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -tags netctl_split,urfave_cli_no_docs -ldflags '$(GO_LDFLAGS)' -o $(BIN)/netctl ./cmd/netctl
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -tags urfave_cli_no_docs -ldflags '$(GO_LDFLAGS)' -o $(BIN)/netctl-full ./cmd/netctl

# install: the binary, man pages, bash and zsh completion, the systemd units
# (their ExecStart names BINDIR's netctl), tmpfiles.d for /run/netctl and the
# hook config example. PREFIX=/usr/local by default; DESTDIR stages it.
# /etc/default/netctl-exporter is installed only where there is none.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
# netctl finds netctl-full in BINDIR/../libexec/netctl and nowhere else
# (cmd/netctl/full.go), so FULLDIR follows BINDIR alone: a LIBEXECDIR given
# to make (GNU's variable, /usr/lib on Debian) does not move it.
override FULLDIR = $(BINDIR)/../libexec/netctl
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
SYSCONFDIR ?= /etc
# zsh looks in /usr/share/zsh/vendor-completions for packages and in
# /usr/local/share/zsh/site-functions for the rest (Debian's fpath).
ifeq ($(PREFIX),/usr)
ZSHCOMPDIR ?= $(DATADIR)/zsh/vendor-completions
else
ZSHCOMPDIR ?= $(DATADIR)/zsh/site-functions
endif
UNITS = $(wildcard deploy/systemd/netctl-*)
install: build-netctl
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DATADIR)/bash-completion/completions \
		$(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(TMPFILESDIR) \
		$(DESTDIR)$(SYSCONFDIR)/netctl $(DESTDIR)$(SYSCONFDIR)/default
	install -m 0755 $(BIN)/netctl $(DESTDIR)$(BINDIR)/netctl
	install -d $(DESTDIR)$(FULLDIR)
	install -m 0755 $(BIN)/netctl-full $(DESTDIR)$(FULLDIR)/netctl-full
	install -m 0644 docs/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 completion/netctl.bash $(DESTDIR)$(DATADIR)/bash-completion/completions/netctl
	install -m 0644 completion/_netctl $(DESTDIR)$(ZSHCOMPDIR)/_netctl
	for u in $(UNITS); do \
		sed 's|/usr/bin/netctl|$(BINDIR)/netctl|g' $$u >$(DESTDIR)$(SYSTEMDUNITDIR)/$$(basename $$u) && \
		chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$(basename $$u) || exit 1; done
	install -m 0644 deploy/tmpfiles.d/netctl.conf $(DESTDIR)$(TMPFILESDIR)/netctl.conf
	install -m 0644 deploy/etc/hook.json.example $(DESTDIR)$(SYSCONFDIR)/netctl/hook.json.example
	[ -e $(DESTDIR)$(SYSCONFDIR)/default/netctl-exporter ] || \
		install -m 0644 deploy/default/netctl-exporter $(DESTDIR)$(SYSCONFDIR)/default/netctl-exporter

## uninstall: remove what make install put there (same PREFIX and DESTDIR), nothing else;
## /etc/default/netctl-exporter (perhaps edited) is left.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/netctl $(DESTDIR)$(FULLDIR)/netctl-full $(DESTDIR)$(DATADIR)/bash-completion/completions/netctl \
		$(DESTDIR)$(ZSHCOMPDIR)/_netctl $(DESTDIR)$(TMPFILESDIR)/netctl.conf \
		$(DESTDIR)$(SYSCONFDIR)/netctl/hook.json.example \
		$(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(wildcard docs/man/*.1))) \
		$(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,$(notdir $(UNITS)))
	-rmdir $(DESTDIR)$(FULLDIR) 2>/dev/null

## deb: bin/netctl_VERSION_ARCH.deb (nfpm as a library: no root, no dpkg-deb);
## the binary is make build's, the contents make install's with PREFIX=/usr.
## An untagged build's version carries the commit count (0~N.gHASH), so builds upgrade in order.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
COMMITS ?= $(shell git rev-list --count HEAD 2>/dev/null || echo 0)
## The package's architecture is the binary's (GOARCH), in Debian's names.
DEB_ARCH ?= $(patsubst arm,armhf,$(patsubst 386,i386,$(patsubst ppc64le,ppc64el,$(shell $(GO) env GOARCH))))
deb: build-netctl
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./internal/mkdeb -root $(CURDIR) -bin $(BIN)/netctl \
		-version '$(VERSION)' -commits '$(COMMITS)' -arch $(DEB_ARCH) -out $(BIN)

docs:
	$(GO) run ./cmd/netctl gendoc --dir $(CURDIR)
## proto: regenerate kubevirt/hooks/{info,v1alpha3} from KubeVirt's hook .proto files (protoc from
## test/host-deps.sh; protoc-gen-go v1.36.12 and protoc-gen-go-grpc v1.6.2 built into .cache/protoc-bin).
proto:
	bash kubevirt/hooks/gen.sh $(CURDIR)

## test: every layer: unit, host (root, throwaway netns), VM harness self-test, VM on both kernels.
test: vm-deps test-unit test-host test-harness test-vm
# Under make test the tools test/host-deps.sh installs are there: a unit test
# that needs one (GNU cpio) fails instead of skipping.
test: export NETCTL_VM_DEPS := 1

# The unit and host layers run with -race, through test/cmd/testcheck, which
# fails the run if a host test skipped (it checked nothing) or if a package
# ran no test although it has tests of that layer ("ok ... [no tests to run]").
UNIT_SKIP = ^(TestHost|TestVM|TestHarness)
# Packages with host tests (func TestHost... in a *_test.go file).
HOST_PKGS = $(sort $(patsubst %/,%,$(dir $(shell grep -rl --include='*_test.go' --exclude-dir=.cache '^func TestHost' .))))
TESTCHECK = $(BIN)/testcheck
FUZZTIME ?= 30s

$(TESTCHECK): $(wildcard test/cmd/testcheck/*.go)
	CGO_ENABLED=0 $(GO) build -o $@ ./test/cmd/testcheck

## test-unit: pure and fake-backed tests (and the fuzz targets' seed corpora), no root, no VM; -race.
test-unit: $(TESTCHECK)
	set -o pipefail; $(GO) test -race -count=1 -timeout 20m -json -skip '$(UNIT_SKIP)' ./... | $(TESTCHECK) -skip '$(UNIT_SKIP)'

## test-host: root tests on this machine's kernel, each in its own network namespace
## (two talk to a real QEMU, one booting the 6.12 kernel, so the VM tools and images come first); -race.
## A host test that skips fails the run.
test-host: vm-prepare $(TESTCHECK)
	set -o pipefail; NETCTL_TEST_HOST=1 $(GO) test -race -count=1 -timeout 30m -json -run '^TestHost' $(HOST_PKGS) | \
		$(TESTCHECK) -run '^TestHost' -no-skip '^TestHost'

## fuzz: every FuzzXxx target in the module, one at a time, FUZZTIME each (default 30s).
fuzz:
	bash test/fuzz.sh $(FUZZTIME)

vm-deps:
	@bash test/host-deps.sh
	@bash test/libvirt-suite.sh $(CURDIR)/.cache/libvirt-qemuxml

vm-prepare: vm-deps build
	$(VMEXEC) prepare -kernel $(KERNEL)

## test-harness: the VM harness's own tests (exit codes, panic, hang, QEMU failure);
## through testcheck: one that skipped or did not run fails.
test-harness: vm-prepare $(TESTCHECK)
	set -o pipefail; NETCTL_VM_SELFTEST=1 $(GO) test -count=1 -run '^TestHarness' -json ./test/vm | \
		$(TESTCHECK) -run '^TestHarness' -no-skip '^TestHarness'

## test-vm: TestVM* tests in the VM; KERNEL=6.12, 6.1 or all. Through testcheck:
## a package that ran no TestVM test, or a VM test that skipped without its
## without_<capability> check passing (testenv.Require), fails the run.
test-vm: vm-prepare $(TESTCHECK)
	TESTCHECK=$(TESTCHECK) bash test/run-vm-tests.sh $(KERNEL) $(VM_PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags netctl_split,urfave_cli_no_docs ./cmd/netctl
	GOARCH=arm64 CGO_ENABLED=0 $(GO) build ./...
	GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...
	@if $(GO) run $(STATICCHECK) -version >/dev/null 2>&1; then $(GO) run $(STATICCHECK) ./...; \
	 else echo "lint: staticcheck not available from the module proxy; skipped"; fi

## demo: netctl attach on real QEMU guests (test/cmd/netctl-demo), each command and its real output.
## On this host (no vhost-net): a 6.12 guest in a network namespace the demo creates, netctl attach
## (the fallback chain -> QEMU userspace virtio-net), pings both ways, diagnose, list, detach, nothing
## left. Then in the 6.12 test VM: a nested firmware-only QEMU on kernel vhost-net (DHCP through it,
## diagnose shows vhost started, detach). About 30 s; exits 1, having cleaned up, if a step fails.
demo: KERNEL := 6.12
demo: vm-prepare
	$(BIN)/netctl-demo

## bench: vhost-net benchmarks in the 6.12 VM, and attach's (latency on this host and in the VM,
## the data path of a nested guest in the VM, the netmap and TX-thread seeds with two nested guests
## and their CPU per MB), stats' (exporter scrape cost, stats --watch CPU, on this host) and the
## vhost-user bridge's (data path against direct vhost-net, QEMU's first packet through it, in the VM);
## JSON lines appended to bench/results.jsonl.
## BENCH=startup, BENCH=vhostnet, BENCH=attach, BENCH=stats, BENCH=vhostuser, BENCH=libvirt or BENCH=migrate runs one of the sets.
BENCH ?= all
bench: KERNEL := 6.12
bench: vm-prepare build-netctl
	CGO_ENABLED=0 $(GO) build -o $(BIN)/startup-bench ./test/bench/startup
	gcc -O2 -static -o $(BIN)/noop-c test/bench/cnoop/noop.c
	CGO_ENABLED=0 $(GO) build -o $(BIN)/noop-go ./test/bench/gonoop
	CGO_ENABLED=0 $(GO) build -o $(BIN)/vhostnet-bench ./test/bench/vhostnet
	gcc -O2 -static -o $(BIN)/setup-c test/bench/csetup/setup.c
	gcc -O2 -static -o $(BIN)/vdpa-setup-c test/bench/csetup/vdpa_setup.c
	CGO_ENABLED=0 $(GO) build -o $(BIN)/attach-bench ./test/bench/attach
	CGO_ENABLED=0 $(GO) build -o $(BIN)/l2agent ./test/bench/l2agent
	gcc -O2 -static -o $(BIN)/attach-c test/bench/cattach/attach.c
	$(GO) build -o $(BIN)/stats-bench ./test/bench/stats
	CGO_ENABLED=0 $(GO) build -o $(BIN)/statsvhost-bench ./test/bench/statsvhost
	CGO_ENABLED=0 $(GO) build -o $(BIN)/vhostuser-bench ./test/bench/vhostuser
	CGO_ENABLED=0 $(GO) build -o $(BIN)/migrate-bench ./test/bench/migrate
	BIN=$(BIN) BENCH=$(BENCH) bash test/bench/run.sh

clean:
	rm -rf $(BIN)
	@echo "the VM cache .cache/vm is kept; rm -rf .cache to refetch kernels"
