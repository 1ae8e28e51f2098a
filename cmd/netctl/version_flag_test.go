package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFlag: netctl --version prints what netctl version does.
func TestVersionFlag(t *testing.T) {
	flag, cmd := run(t, "--version"), run(t, "version")
	if flag != cmd {
		t.Errorf("netctl --version printed %q, netctl version %q", flag, cmd)
	}
}

// TestVersionFromBuildInfo: without make's -X main.version, a netctl
// built by "go install github.com/netctl/netctl/cmd/netctl@v1.2.3" says
// v1.2.3 (the module's version in its build info), not "dev"; the
// revision and the dirty flag come from the VCS settings.
func TestVersionFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/netctl/netctl", Version: "v1.2.3"}}
	if v := versionFrom("dev", bi, true); v.Version != "v1.2.3" {
		t.Errorf("go install @v1.2.3: version %q, want v1.2.3", v.Version)
	}
	bi.Main.Version = "(devel)"
	bi.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	v := versionFrom("dev", bi, true)
	if v.Version != "dev" || v.Commit != "0123456789abcdef0123" || !v.Modified {
		t.Errorf("a plain go build: %+v", v)
	}
	if s := v.String(); !strings.HasPrefix(s, "netctl dev (0123456789ab, modified) go") {
		t.Errorf("a plain go build prints %q", s)
	}
	if v := versionFrom("v2.0.0-1-gabc", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, true); v.Version != "v2.0.0-1-gabc" {
		t.Errorf("make's version %q was replaced by the module's", v.Version)
	}
	if v := versionFrom("dev", nil, false); v.Version != "dev" || v.Go == "" {
		t.Errorf("no build info: %+v", v)
	}
}
