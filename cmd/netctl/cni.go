package main

import (
	"cmp"
	"errors"
	"io"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/cni"
	"github.com/netctl/netctl/hostnic"
	"github.com/netctl/netctl/state"
)

// cniMode says whether netctl was run as a CNI plugin: a runtime runs the
// plugin binary named by the configuration's "type" ("netctl") with no
// arguments and CNI_COMMAND in the environment. `netctl cni` is the same
// run, spelled out.
func cniMode(args []string) bool {
	return len(args) == 1 && os.Getenv("CNI_COMMAND") != ""
}

func cniCommand() *cli.Command {
	return &cli.Command{
		Name:  "cni",
		Usage: "run as the CNI plugin \"netctl\" (CNI_COMMAND etc. in the environment, the network configuration on stdin)",
		Description: "CNI spec 1.1 (ADD, DEL, CHECK, STATUS, VERSION). In the pod's network namespace ADD makes what the\n" +
			"decision picks: a multiqueue vnet_hdr tap named CNI_IFNAME owned by uid 107 (\"owner\"), a macvtap on\n" +
			"\"master\", or a vdpa device from \"mgmtdev\" published in the device-info file. A runtime runs the binary\n" +
			"installed as \"netctl\" in CNI_PATH without arguments: netctl with CNI_COMMAND set and no arguments is netctl cni.\n" +
			"Errors are CNI error JSON on stdout (exit 1); logs go to stderr. See docs/kubernetes.md.",
		ArgsUsage: " ",
		Action: func(c *cli.Context) error {
			if e := runCNI(); e != nil {
				return errors.New(e.Msg)
			}
			return nil
		},
	}
}

// runCNI runs the plugin through skel, which reads the environment and
// stdin and prints the result; a failure's CNI error JSON is printed on
// stdout and returned.
func runCNI() *types.Error {
	if e := preparse(); e != nil {
		if err := e.Print(); err != nil {
			os.Stderr.WriteString("netctl cni: " + err.Error() + "\n")
		}
		return e
	}
	p := &cni.Plugin{Host: hostnic.Real{CacheDir: cmp.Or(os.Getenv("NETCTL_RUN_DIR"), state.DefaultDir)}, Log: os.Stderr}
	e := skel.PluginMainFuncsWithError(p.Funcs(), cni.Versions, cni.About)
	if e != nil {
		if err := e.Print(); err != nil {
			os.Stderr.WriteString("netctl cni: " + err.Error() + "\n")
		}
		return e
	}
	return nil
}

// preparse checks ADD's, CHECK's and DEL's configuration before skel
// does, so that every bad one gets netctl's message (what to fix), not
// the library's ("missing network name"); skel then reads the same bytes.
func preparse() *types.Error {
	switch os.Getenv("CNI_COMMAND") {
	case "ADD", "CHECK", "DEL":
	default:
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, cni.MaxConfig+1))
	if err != nil {
		return types.NewError(types.ErrIOFailure, "netctl: reading the network configuration from stdin: "+err.Error(), "")
	}
	// DEL goes on with a configuration netctl refuses: it deletes what
	// ADD made by the attachment's names and marks (cni.Plugin.Del).
	if _, err := cni.ParseConfig(b); err != nil && os.Getenv("CNI_COMMAND") != "DEL" {
		var ce *cni.ConfigError
		if errors.As(err, &ce) {
			return ce.CNI()
		}
		return types.NewError(types.ErrInvalidNetworkConfig, "netctl: "+err.Error(), "")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return types.NewError(types.ErrIOFailure, "netctl: "+err.Error(), "")
	}
	go func() {
		w.Write(b)
		w.Close()
	}()
	os.Stdin = r
	return nil
}
