package hooks

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code of KubeVirt's hook
// protos into a temp dir (gen.sh: protoc with protoc-gen-go v1.36.12 and
// protoc-gen-go-grpc v1.6.2, built from the module proxy) and diffs it
// with the committed files: the committed code is what the committed
// .proto text gives. Without protoc it skips, except under make test
// (NETCTL_VM_DEPS=1: test/host-deps.sh installed protobuf-compiler), where
// it fails.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		if os.Getenv("NETCTL_VM_DEPS") != "" {
			t.Fatalf("protoc missing under make test: test/host-deps.sh installs protobuf-compiler: %v", err)
		}
		t.Skipf("protoc missing (apt-get install protobuf-compiler): %v", err)
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "gen.sh", out, filepath.Join(t.TempDir(), "bin"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, b)
	}
	files := []string{
		"info/api_info.pb.go", "info/api_info_grpc.pb.go",
		"v1alpha3/api_v1alpha3.pb.go", "v1alpha3/api_v1alpha3_grpc.pb.go",
	}
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join(out, "kubevirt/hooks", f))
		if err != nil {
			t.Fatalf("gen.sh wrote no %s: %v", f, err)
		}
		have, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Errorf("kubevirt/hooks/%s differs from what make proto generates: run make proto and commit", f)
		}
	}
	gen, _ := filepath.Glob(filepath.Join(out, "kubevirt/hooks/*/*.go"))
	if len(gen) != len(files) {
		t.Errorf("gen.sh wrote %v, want the %d files committed", gen, len(files))
	}
}
