package gendoc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func testApp() *cli.App {
	app := &cli.App{
		Name:  "tool",
		Usage: "does things",
		Commands: []*cli.Command{
			{
				Name: "run", Usage: "run it", ArgsUsage: "NAME",
				Description: "first line\n.starts with a dot\nback\\slash\n\n  indented example",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "mode", Usage: "fast, slow or auto (default: fast)"},
					&cli.DurationFlag{Name: "timeout", Value: 5 * time.Second, Usage: "give up after this long"},
					&cli.DurationFlag{Name: "every", Usage: "repeat (0: never)"},
					&cli.BoolFlag{Name: "json", Aliases: []string{"j"}, Usage: "print JSON"},
					&cli.StringFlag{Name: "vm", Usage: "the VM"},
				},
			},
			{Name: "group", Usage: "a group", Subcommands: []*cli.Command{{Name: "leaf", Usage: "a leaf", ArgsUsage: "DEV"}}},
			{Name: "secret", Hidden: true, Usage: "hidden"},
		},
	}
	app.Setup()
	return app
}

func TestGenerate(t *testing.T) {
	f, err := Generate(testApp())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"completion/_netctl", "completion/netctl.bash", "docs/man/tool-group.1", "docs/man/tool-run.1", "docs/man/tool.1"}
	// The completion files are named for netctl; the pages for the app.
	if got := strings.Join(f.Names(), " "); got != strings.Join(want, " ") {
		t.Fatalf("files %s, want %s", got, strings.Join(want, " "))
	}
	run := string(f["docs/man/tool-run.1"])
	for _, w := range []string{
		"\\&.starts with a dot\n", // not a roff request
		"back\\eslash",            // not an escape
		".RS\n.nf\nindented example\n.fi\n.RE\n",
		"\\fB\\-\\-timeout\\fR \\fIDURATION\\fR\ngive up after this long (default: 5s)\n",
		"\\fB\\-\\-every\\fR \\fIDURATION\\fR\nrepeat (0: never)\n", // no "(default: 0s)"
		"\\fB\\-\\-json\\fR, \\fB\\-j\\fR\nprint JSON\n",
		".B tool run\n[\\fIoptions\\fR] \\fINAME\\fR\n",
	} {
		if !strings.Contains(run, w) {
			t.Errorf("tool-run.1 lacks %q:\n%s", w, run)
		}
	}
	if !strings.Contains(string(f["docs/man/tool-group.1"]), ".SS tool group leaf\n") {
		t.Errorf("tool-group.1 lacks its subcommand:\n%s", f["docs/man/tool-group.1"])
	}
	bash := string(f[BashFile])
	for _, w := range []string{
		"\t'tool')\n\t\t__tool_cmds='run group'\n",
		"'tool run --mode') echo 'words:fast slow auto'",
		"'tool run --vm') echo 'vm'",
		"\t'tool group leaf')\n\t\t__tool_cmds=''\n\t\t__tool_flags='--help -h'\n\t\t__tool_vflags=''\n\t\t__tool_args='vdpa'\n",
	} {
		if !strings.Contains(bash, w) {
			t.Errorf("bash completion lacks %q", w)
		}
	}
	if strings.Contains(bash, "secret") || strings.Contains(string(f["docs/man/tool.1"]), "secret") {
		t.Errorf("a hidden command is documented")
	}
}

// TestWriteRemovesStalePages: a page of a command that is gone goes;
// nothing else in the directory is touched.
func TestWriteRemovesStalePages(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, ManDir)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "tool-gone.1"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("keep"), 0o644)
	f, err := Generate(testApp())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tool-gone.1")); !os.IsNotExist(err) {
		t.Errorf("stale page kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
		t.Errorf("README removed: %v", err)
	}
	if stale, err := f.Stale(root); err != nil || len(stale) != 0 {
		t.Errorf("Stale after Write: %v, %v", stale, err)
	}
}

// TestOddHelpText: help text with a line break followed by a dot or an apostrophe
// (a roff request or control line) in any field stays text on the page:
// no line of any page starts a request the generator did not write.
func TestOddHelpText(t *testing.T) {
	odd := "first line\n.SH EVIL\n'bp evil\nlast"
	app := &cli.App{
		Name:  "tool",
		Usage: odd,
		Commands: []*cli.Command{
			{
				Name: "run", Usage: odd, Description: odd, UsageText: "tool run\n.SH EVIL",
				Flags: []cli.Flag{&cli.StringFlag{Name: "mode", Usage: odd}},
			},
			{Name: "group", Usage: odd, Subcommands: []*cli.Command{{Name: "leaf", Usage: odd, Description: odd,
				Flags: []cli.Flag{&cli.BoolFlag{Name: "x", Usage: odd}}}}},
		},
	}
	app.Setup()
	f, err := Generate(app)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"docs/man/tool.1", "docs/man/tool-run.1", "docs/man/tool-group.1"} {
		for i, l := range strings.Split(string(f[name]), "\n") {
			if strings.HasPrefix(l, ".SH EVIL") || strings.HasPrefix(l, "'bp") {
				t.Errorf("%s:%d: help text became a roff request: %q", name, i+1, l)
			}
		}
	}
	// NAME is one line (whatis and lexgrog read that line alone).
	if w := ".SH NAME\ntool\\-run \\- first line .SH EVIL 'bp evil last\n"; !strings.Contains(string(f["docs/man/tool-run.1"]), w) {
		t.Errorf("tool-run.1 lacks %q:\n%s", w, f["docs/man/tool-run.1"])
	}
}
