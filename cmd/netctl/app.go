package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/internal/lazyre"
)

func init() {
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, buildVersion()) }
	cli.FlagStringer = flagString
}

// commands are netctl's top-level commands, by name, each built when a
// tree needs it: a call names one ("netctl attach ..."), and building the
// others (their flags, help texts, examples) cost every hook call and
// every attach a millisecond or more, most of it page faults of a fresh
// process. TestCommandTable holds the names to what each builds. (A
// function, not a var: gendoc's command builds the whole tree.)
func commands() []namedCommand {
	return []namedCommand{
		{"attach", attachCommand},
		{"detach", detachCommand},
		{"list", listCommand},
		{"gc", gcCommand},
		{"vm", vmCommand},
		{"selftest", selftestCommand},
		{"vdpa", vdpaCommand},
		{"probe", probeCommand},
		{"nfd", nfdCommand},
		{"plan", planCommand},
		{"migrate", migrateCommand},
		{"diagnose", diagnoseCommand},
		{"hook", hookCommand},
		{"cni", cniCommand},
		{"kubevirt", kubevirtCommand},
		{"stats", statsCommand},
		{"exporter", exporterCommand},
		{"vhost-user", vhostUserCommand},
		{"vhost-user-reap", vhostUserReapCommand},
		{"version", versionCommand},
		{"gendoc", gendocCommand},
	}
}

// asksHelp says whether a is one of the words urfave/cli takes as asking
// for help.
func asksHelp(a string) bool {
	switch a {
	case "-h", "--h", "-help", "--help", "help", "h":
		return true
	}
	return false
}

type namedCommand struct {
	name  string
	build func() *cli.Command
}

// newApp builds the whole command tree (help, docs, completion).
func newApp() *cli.App { return newAppFor(nil) }

// newAppFor builds the command tree args need: when args[1] is a command's
// name and no later argument asks for help, that command alone (its
// errors and subcommands are its own); otherwise every command (urfave/cli
// looks "X --help Y" up among the top-level commands when X has none of
// its own, and "help" and "h" are its help command's names). Every command goes through prepare, which
// gives the whole tree the same rules (see exitcode.go): positional
// arguments are counted against ArgsUsage, required flags are checked, and
// mistakes become usage errors (exit 2, one line and a hint, never the
// whole help).
func newAppFor(args []string) *cli.App {
	var cmds []*cli.Command
	table := commands()
	for _, c := range table {
		if len(args) > 1 && args[1] == c.name && !slices.ContainsFunc(args[2:], asksHelp) {
			cmds = []*cli.Command{c.build()}
			break
		}
	}
	if cmds == nil {
		for _, c := range table {
			cmds = append(cmds, c.build())
		}
	}
	app := &cli.App{
		Name:  "netctl",
		Usage: "set up and explain in-kernel virtio-net data paths (vhost-net, vDPA)",
		Description: "netctl opens /dev/vhost-net and vDPA devices, binds them to tap, macvtap or packet-socket\n" +
			"backends with the right virtio-net header and offloads, and explains every feature bit.\n" +
			"Exit status: 0 success, 1 failure, 2 usage error.",
		Version:  buildVersion().Version,
		Commands: cmds,
		// urfave/cli would call os.Exit itself for an ExitCoder; runMain
		// decides the exit code instead.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageErr("netctl", "%v", err) }
	app.Action = groupAction("netctl")
	prepare(app.Commands, "netctl")
	// urfave/cli adds its help command in Setup; a bad flag to it
	// ("netctl help -j") would print the whole help and exit 1. The same
	// command serves "netctl vdpa help", so this covers every level.
	app.Setup()
	if h := app.Command("help"); h != nil {
		h.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageErr("netctl", "help: %v", err) }
	}
	return app
}

// prepare applies netctl's command-line rules to every command under
// parent (the command path, "netctl vdpa").
func prepare(cmds []*cli.Command, parent string) {
	for _, cmd := range cmds {
		path := parent + " " + cmd.Name
		cmd.Description = withExample(cmd.Description, path)
		cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageErr(path, "%v", err) }
		if len(cmd.Subcommands) > 0 {
			prepare(cmd.Subcommands, path)
			if cmd.Action == nil {
				cmd.Action = groupAction(path)
			}
			continue
		}
		// urfave/cli prints the whole help when a required flag is
		// missing: check them here instead, as usage errors.
		var required []string
		for _, f := range cmd.Flags {
			if unrequire(f) {
				required = append(required, f.Names()[0])
			}
		}
		minArgs, maxArgs := arity(cmd.ArgsUsage)
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error {
			for _, name := range required {
				if !c.IsSet(name) {
					return usageErr(path, "--%s is required", name)
				}
			}
			if err := checkArgs(c, path, cmd.ArgsUsage, minArgs, maxArgs); err != nil {
				return err
			}
			return commandError(path, action(c))
		}
	}
}

// groupAction runs for a command that only groups others ("netctl",
// "netctl vdpa") when no known subcommand was named.
func groupAction(path string) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.Args().Present() {
			return usageErr(path, "unknown command %q", c.Args().First())
		}
		var names []string
		for _, s := range c.Command.Subcommands {
			if !s.Hidden && s.Name != "help" {
				names = append(names, s.Name)
			}
		}
		if len(names) == 0 { // the root: its commands are the app's
			for _, s := range c.App.Commands {
				if !s.Hidden && s.Name != "help" {
					names = append(names, s.Name)
				}
			}
		}
		return usageErr(path, "name a command: %s", strings.Join(names, ", "))
	}
}

// wasRequired holds the flags unrequire made optional, so that a flag
// shared by several commands (a package-level var) or seen by a second
// newApp is still known to be required.
var wasRequired sync.Map // cli.Flag -> struct{}

// unrequire turns off urfave/cli's own check of a required flag (which
// prints the whole help) and says whether the flag is required.
func unrequire(f cli.Flag) bool {
	if _, ok := wasRequired.Load(f); ok {
		return true
	}
	r := unrequireOnce(f)
	if r {
		wasRequired.Store(f, struct{}{})
	}
	return r
}

func unrequireOnce(f cli.Flag) bool {
	var required *bool
	var usage *string
	switch f := f.(type) {
	case *cli.StringFlag:
		required, usage = &f.Required, &f.Usage
	case *cli.IntFlag:
		required, usage = &f.Required, &f.Usage
	case *cli.UintFlag:
		required, usage = &f.Required, &f.Usage
	case *cli.BoolFlag:
		required, usage = &f.Required, &f.Usage
	case *cli.DurationFlag:
		required, usage = &f.Required, &f.Usage
	case *cli.StringSliceFlag:
		required, usage = &f.Required, &f.Usage
	default:
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			panic(fmt.Sprintf("netctl: flag %s: add its type to unrequireOnce", f.Names()[0]))
		}
		return false
	}
	r := *required
	*required = false
	if r {
		*usage += " (required)"
	}
	return r
}

// arity reads how many positional arguments a command takes from its
// ArgsUsage: "" or " " none, "DEV" one, "DEV QUEUE" two, "[DEV]" zero or
// one, "HOST.json..." one or more. -1 is no upper bound.
func arity(usage string) (min, max int) {
	for _, w := range strings.Fields(usage) {
		optional := strings.HasPrefix(w, "[")
		switch {
		case strings.HasSuffix(strings.TrimSuffix(w, "]"), "..."):
			if !optional {
				min++
			}
			return min, -1
		case optional:
			max++
		default:
			min++
			max++
		}
	}
	return min, max
}

// argsLikeFlags are the commands whose arguments may start with '-':
// libvirt passes a domain's name to the hook, and libvirt allows "-x"
// (the installed script puts -- before it).
var argsLikeFlags = map[string]bool{"netctl hook qemu": true}

func checkArgs(c *cli.Context, path, usage string, min, max int) error {
	args := c.Args().Slice()
	for _, a := range args {
		if len(a) > 1 && a[0] == '-' && !argsLikeFlags[path] {
			return usageErr(path, "%q after the arguments: put flags first (%s [flags] %s)", a, path, strings.TrimSpace(usage))
		}
	}
	n := len(args)
	switch {
	case max == 0 && n > 0:
		return usageErr(path, "takes no arguments, got %q", strings.Join(args, " "))
	case n < min || (max >= 0 && n > max):
		want := fmt.Sprintf("%d", min)
		switch {
		case max < 0:
			want = fmt.Sprintf("at least %d", min)
		case max != min:
			want = fmt.Sprintf("%d to %d", min, max)
		}
		return usageErr(path, "takes %s argument(s) (%s), got %d", want, strings.TrimSpace(usage), n)
	}
	return nil
}

// defaultFlagStringer is urfave/cli's own (init replaces cli.FlagStringer).
var defaultFlagStringer = cli.FlagStringer

// defaultText matches the "(default: X)" urfave/cli appends to a flag's
// usage.
var defaultText = lazyre.New(` \(default: ([^)]*)\)$`)

// flagString is urfave/cli's flag line with the default shown once: not
// when the usage already names it, and not for false, 0, "" or 0s (which
// mean "off" or "the device's own value").
func flagString(f cli.Flag) string {
	s := defaultFlagStringer(f)
	m := defaultText.FindStringSubmatchIndex(s)
	if m == nil {
		return s
	}
	usage, def := s[:m[0]], s[m[2]:m[3]]
	switch {
	case strings.Contains(usage, "(default"), def == "false", def == "0", def == `""`, def == "0s":
		return usage
	}
	return s
}
