package hook

import (
	"os"
	"reflect"
	"testing"
)

// TestExampleConfig: the example the package installs
// (/etc/netctl/hook.json.example) is a valid config and says the defaults.
func TestExampleConfig(t *testing.T) {
	b, err := os.ReadFile("../deploy/etc/hook.json.example")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		t.Fatalf("hook.json.example: %v", err)
	}
	if c.Manage != ManageListed || c.Log != DefaultLogPath || c.VDPADir != DefaultVDPADir || c.TimeoutOrDefault() != DefaultTimeout {
		t.Errorf("hook.json.example does not say the defaults: %+v", c)
	}
	d := DefaultConfig()
	if c.TimeoutOrDefault() != d.TimeoutOrDefault() || reflect.TypeOf(c) != reflect.TypeOf(d) {
		t.Errorf("example %+v, defaults %+v", c, d)
	}
}
