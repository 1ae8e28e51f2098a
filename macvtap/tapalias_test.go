package macvtap

import (
	"errors"
	"strings"
	"testing"
)

// TestTapAliasOnlyOnCreate: TapConfig.Alias relabels only a tap this
// call creates (Exclusive): attaching to someone's existing tap must not
// change its alias. Refused before anything is opened.
func TestTapAliasOnlyOnCreate(t *testing.T) {
	for _, c := range []TapConfig{
		{Name: "nctlalias0", Alias: "netctl hook tap"},
		{Name: "nctlalias0", Alias: strings.Repeat("a", 256), Exclusive: true},
	} {
		if _, err := CreateTap(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateTap(alias %.20q, exclusive %v): %v, want ErrInvalid", c.Alias, c.Exclusive, err)
		}
	}
}
