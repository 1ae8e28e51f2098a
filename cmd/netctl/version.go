package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// version is set at link time: -ldflags "-X main.version=v0.1.0".
var version = "dev"

type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

func buildVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	return versionFrom(version, bi, ok)
}

// versionFrom is the version of a netctl linked with -X main.version=ver
// ("dev" without) and built as bi says: a "go install ...@v1.2.3" has no
// -X but its module's version, v1.2.3.
func versionFrom(ver string, bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Version: ver, Go: runtime.Version()}
	if ok && bi != nil {
		if ver == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

func (v versionInfo) String() string {
	s := "netctl " + v.Version
	if v.Commit != "" {
		c := v.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (" + c
		if v.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + v.Go
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print netctl's version",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"}},
		Action: func(c *cli.Context) error {
			v := buildVersion()
			if c.Bool("json") {
				b, _ := json.Marshal(v)
				fmt.Fprintln(c.App.Writer, string(b))
				return nil
			}
			fmt.Fprintln(c.App.Writer, v)
			return nil
		},
	}
}
