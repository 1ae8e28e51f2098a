package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/internal/errs"
	"github.com/netctl/netctl/qemuproc"
)

// Exit codes, errors and --json.
//
// netctl exits 0 on success, 1 when the command failed and 2 on a usage
// error: an unknown command or flag, a flag value that does not parse, a
// wrong number of arguments, a missing required flag, or a value out of
// range. A usage error prints one line and a hint ("run 'netctl plan
// --help'"), never the whole help.
//
// A command reports a usage error in either of two ways, and both give
// exit 2 (prepare and runMain do the mapping for every command, so no command
// needs to do anything else):
//   - return usageErr(path, ...), or
//   - return an error that wraps errs.ErrInvalid (the packages' range
//     checks do: fmt.Errorf("selftest: %d queue pairs: use 1 to 16: %w", n,
//     errs.ErrInvalid)). Wrap ErrInvalid only for input the user gave,
//     never for an EINVAL from the kernel.
//
// Every error is printed once, on stderr, as "netctl: <what failed>:
// <why>", followed by a hint when there is one. Each layer adds its own
// context once: a command's error is prefixed with the command's name
// unless the message already starts with it. With --json (-j) anywhere on
// the command line the error is also written to stdout as one JSON object,
// {"error": "...", "hint": "..."}.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a mistake in how netctl was called.
// jsonReported marks an error a command has already put in the JSON it
// printed (netctl gc --json: each failed record carries its error), so
// that stdout holds one JSON document, not that one and an error object.
// The message still goes to stderr and the exit code is still 1.
type jsonReported struct{ err error }

func (e *jsonReported) Error() string { return e.err.Error() }
func (e *jsonReported) Unwrap() error { return e.err }

type usageError struct {
	path string // the command, "netctl vdpa dev add"
	err  error
}

// Error is the cause's message without a trailing ": invalid argument"
// (errs.ErrInvalid wrapped last says nothing the exit code does not).
func (e *usageError) Error() string {
	return strings.TrimSuffix(e.err.Error(), ": "+errs.ErrInvalid.Error())
}

// Unwrap gives the cause and errs.ErrInvalid: every usage error is bad
// input, so errors.Is(err, errs.ErrInvalid) holds for all of them.
func (e *usageError) Unwrap() []error { return []error{e.err, errs.ErrInvalid} }

// usageErr is a usage error of the command at path; the message starts
// with the command's name after "netctl".
func usageErr(path, format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	if name := strings.TrimPrefix(path, "netctl "); name != path {
		msg = name + ": " + msg
	}
	return &usageError{path: path, err: errors.New(msg)}
}

// commandError gives a command's error its context once and marks bad
// input (errs.ErrInvalid) as a usage error of that command.
func commandError(path string, err error) error {
	if err == nil {
		return nil
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	noun := strings.Fields(path)[1] // "selftest", "vdpa", ...
	if !strings.HasPrefix(err.Error(), noun+":") && !strings.HasPrefix(err.Error(), noun+" ") {
		err = fmt.Errorf("%s: %w", noun, err)
	}
	if errors.Is(err, errs.ErrInvalid) {
		return &usageError{path: path, err: err}
	}
	return err
}

// hint says what to do about err, or "".
func hint(err error) string {
	var ue *usageError
	var one *oneLineError
	switch {
	case errors.As(err, &one):
		return ""
	case errors.As(err, &ue):
		return fmt.Sprintf("run '%s --help'", ue.path)
	case errors.Is(err, errs.ErrInvalid):
		return "run 'netctl help'"
	case errors.Is(err, os.ErrPermission):
		return "run as root: netctl needs CAP_NET_ADMIN"
	case errors.Is(err, qemuproc.ErrNoVM):
		return "run 'netctl vm list' to see the running QEMUs and their names"
	case errors.Is(err, errs.ErrNotAvailable), errors.Is(err, errs.ErrNotSupported):
		return "run 'netctl probe' to see what this kernel offers"
	case errors.Is(err, errs.ErrBusy):
		return "close what holds the device, then try again"
	}
	return ""
}

// exitCode is the exit status for err.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), errors.Is(err, errs.ErrInvalid):
		return exitUsage
	}
	return exitFailure
}

// runMain runs netctl with args (args[0] is the program) and returns its exit
// status.
func runMain(args []string, stdout, stderr io.Writer) int {
	if cniMode(args) {
		if runCNI() != nil {
			return exitFailure
		}
		return exitOK
	}
	return runApp(newAppFor(args), args, stdout, stderr)
}

// runApp is runMain with a given command tree.
func runApp(app *cli.App, args []string, stdout, stderr io.Writer) int {
	// Whatever a command prints, and the error line below, may carry text
	// from outside: it reaches the terminal escaped (termsafe.go).
	stdout, stderr = &safeWriter{w: stdout, wrote: &outputWritten}, &safeWriter{w: stderr, wrote: &outputWritten}
	app.Writer, app.ErrWriter = stdout, stderr
	err := app.Run(args)
	var ec cli.ExitCoder
	var ue *usageError
	if errors.As(err, &ec) && !errors.As(err, &ue) { // urfave/cli's "No help topic for 'x'"
		msg := ec.Error()
		if msg != "" {
			msg = strings.ToLower(msg[:1]) + msg[1:]
		}
		err = usageErr("netctl", "help: %s", msg)
	}
	code := exitCode(err)
	if err == nil {
		return code
	}
	h := hint(err)
	var one *oneLineError
	if code == exitUsage && h == "" && !errors.As(err, &one) {
		h = "run 'netctl help'"
	}
	fmt.Fprintln(stderr, "netctl:", err)
	if h != "" {
		fmt.Fprintln(stderr, h)
	}
	var jr *jsonReported
	if argsWantJSON(args[1:]) && !errors.As(err, &jr) {
		b, _ := json.Marshal(struct {
			Error string `json:"error"`
			Hint  string `json:"hint"`
		}{err.Error(), h})
		fmt.Fprintln(stdout, string(b))
	}
	return code
}

// argsWantJSON is true when -j or --json is on the command line (before
// a "--"): it decides the error's format even when the flags did not
// parse.
func argsWantJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || (name != "j" && name != "json") {
			continue
		}
		if !hasVal || val == "true" || val == "1" {
			return true
		}
	}
	return false
}

// usage is a usage error whose message names its command itself ("plan:
// ..."); %w works. The hint names that command's help.
func usage(format string, a ...any) error {
	err := fmt.Errorf(format, a...)
	path := "netctl"
	if noun, _, ok := strings.Cut(err.Error(), ":"); ok && !strings.ContainsAny(noun, " \t") {
		path += " " + noun
	}
	return &usageError{path: path, err: err}
}
