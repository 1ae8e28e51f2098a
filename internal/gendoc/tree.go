// Package gendoc renders netctl's man pages (roff) and its bash and zsh
// completion from the urfave/cli command tree, so that they say what the
// code does: "make docs" writes them into docs/man and completion, and a
// test in cmd/netctl fails when the checked-in files are not current.
//
// It is pure: it reads the tree and returns file contents; Write puts
// them on disk.
package gendoc

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// Files are the generated files: path relative to the repository's root
// -> content.
type Files map[string][]byte

// ManDir and CompletionDir are where the files go, relative to the root.
const (
	ManDir        = "docs/man"
	CompletionDir = "completion"
	BashFile      = CompletionDir + "/netctl.bash"
	ZshFile       = CompletionDir + "/_netctl"
)

// Generate renders every file from app (built and Setup: its help
// command added). Hidden commands and "help" are left out.
func Generate(app *cli.App) (Files, error) {
	if app == nil || app.Name == "" {
		return nil, fmt.Errorf("gendoc: no app to document")
	}
	f := Files{}
	f[ManDir+"/"+app.Name+".1"] = []byte(rootPage(app))
	for _, c := range visible(app.Commands) {
		f[ManDir+"/"+app.Name+"-"+c.Name+".1"] = []byte(commandPage(app, c))
	}
	nodes := walk(app)
	f[BashFile] = []byte(bashScript(app.Name, nodes))
	f[ZshFile] = []byte(zshScript(app.Name, nodes))
	return f, nil
}

// Names are the files' paths, sorted.
func (f Files) Names() []string {
	n := make([]string, 0, len(f))
	for k := range f {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Write puts the files under root and removes man pages in root's ManDir
// that f no longer has (a command removed), so that the directory is
// exactly the generated set. Nothing else is touched.
func (f Files) Write(root string) error {
	for _, name := range f.Names() {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("gendoc: %w", err)
		}
		if err := os.WriteFile(p, f[name], 0o644); err != nil {
			return fmt.Errorf("gendoc: %w", err)
		}
	}
	stale, err := f.Stale(root)
	if err != nil {
		return err
	}
	for _, s := range stale {
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(s))); err != nil {
			return fmt.Errorf("gendoc: remove stale page: %w", err)
		}
	}
	return nil
}

// Stale lists the man pages (*.1) under root's ManDir that f does not
// have.
func (f Files) Stale(root string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(root, ManDir))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("gendoc: %w", err)
	}
	var stale []string
	for _, e := range ents {
		name := ManDir + "/" + e.Name()
		if strings.HasSuffix(e.Name(), ".1") && f[name] == nil {
			stale = append(stale, name)
		}
	}
	return stale, nil
}

// visible are the commands a user is shown.
func visible(cmds []*cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, c := range cmds {
		if !c.Hidden && c.Name != "help" {
			out = append(out, c)
		}
	}
	return out
}

// flagInfo is what the pages and the completion need of a flag.
type flagInfo struct {
	Names   []string // as typed: --name, -n
	Value   string   // placeholder when it takes a value, else ""
	Usage   string
	Default string
	Env     []string
	Name    string // the first name, without dashes
}

func flags(fs []cli.Flag) []flagInfo {
	var out []flagInfo
	for _, f := range fs {
		if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		fi := flagInfo{Name: f.Names()[0]}
		for _, n := range f.Names() {
			if len(n) == 1 {
				fi.Names = append(fi.Names, "-"+n)
			} else {
				fi.Names = append(fi.Names, "--"+n)
			}
		}
		if d, ok := f.(cli.DocGenerationFlag); ok {
			fi.Usage = d.GetUsage()
			fi.Env = d.GetEnvVars()
			if d.TakesValue() {
				fi.Value = placeholder(f)
				fi.Default = shownDefault(d)
			}
		}
		out = append(out, fi)
	}
	return out
}

// placeholder names a flag's value by its type.
func placeholder(f cli.Flag) string {
	switch f.(type) {
	case *cli.DurationFlag:
		return "DURATION"
	case *cli.IntFlag, *cli.UintFlag, *cli.Int64Flag, *cli.Uint64Flag:
		return "N"
	}
	return strings.ToUpper(strings.ReplaceAll(f.Names()[0], "-", "_"))
}

// shownDefault is the default worth printing: not when the usage names
// it, and not "", 0, 0s or false (they mean "off" or "the device's own").
func shownDefault(d cli.DocGenerationFlag) string {
	def := d.GetDefaultText()
	if def == "" {
		def = d.GetValue()
	}
	switch def {
	case "", `""`, "0", "0s", "false", "[]":
		return ""
	}
	if strings.Contains(d.GetUsage(), "(default") {
		return ""
	}
	if dur, err := time.ParseDuration(def); err == nil && dur == 0 {
		return ""
	}
	return def
}
