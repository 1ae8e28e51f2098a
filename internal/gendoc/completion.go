package gendoc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/internal/lazyre"
)

// node is one command path's completion: its subcommands, its flags, the
// flags that take a value, and what its positional arguments are.
type node struct {
	Path   string // "netctl vdpa dev"
	Cmds   []string
	Flags  []string
	VFlags []string
	Args   string // a value kind (see valueKind), "" for none
	Values map[string]string
}

// walk lists every command path, the root first.
func walk(app *cli.App) []node {
	root := node{Path: app.Name, Values: map[string]string{}}
	for _, c := range visible(app.Commands) {
		root.Cmds = append(root.Cmds, c.Name)
	}
	addFlags(&root, flags(app.VisibleFlags()))
	out := []node{root}
	var rec func(parent string, cmds []*cli.Command)
	rec = func(parent string, cmds []*cli.Command) {
		for _, c := range visible(cmds) {
			n := node{Path: parent + " " + c.Name, Values: map[string]string{}}
			subs := visible(c.Subcommands)
			for _, s := range subs {
				n.Cmds = append(n.Cmds, s.Name)
			}
			fs := flags(c.VisibleFlags())
			if !c.HideHelp && !hasFlag(fs, "help") {
				// urfave/cli adds it to each command when it runs.
				fs = append(fs, flagInfo{Name: "help", Names: []string{"--help", "-h"}})
			}
			addFlags(&n, fs)
			if len(subs) == 0 {
				n.Args = argKind(c.ArgsUsage)
			}
			out = append(out, n)
			rec(n.Path, subs)
		}
	}
	rec(app.Name, app.Commands)
	return out
}

func hasFlag(fs []flagInfo, name string) bool {
	for _, f := range fs {
		if f.Name == name {
			return true
		}
	}
	return false
}

func addFlags(n *node, fs []flagInfo) {
	for _, f := range fs {
		n.Flags = append(n.Flags, f.Names...)
		if f.Value == "" {
			continue
		}
		n.VFlags = append(n.VFlags, f.Names...)
		if k := valueKind(f); k != "" {
			for _, name := range f.Names {
				n.Values[name] = k
			}
		}
	}
}

// Value kinds: what the completion offers for a flag's value or an
// argument. "vm" and "nic" ask netctl (list -j, vm list -j) under a
// short timeout; "domain" asks virsh; "iface" and "vdpa" read sysfs;
// "file" and "dir" are the shell's own; "words:a b c" is a fixed set.
var kindByFlag = map[string]string{
	"vm": "vm", "domain": "domain", "id": "nic",
	"tap": "iface", "lower": "iface", "dev": "iface", "link": "iface",
	"vdpa": "vdpa", "name": "",
	"qmp": "file", "socket": "file", "config": "file", "plan": "file", "from": "file",
	"save": "file", "binary": "file",
	"dir": "dir", "run-dir": "dir",
}

// enumUsage matches a usage that is only a list of words: "auto, vdpa,
// vhost-net or userspace".
var enumUsage = lazyre.New(`^[a-z][a-z0-9-]*(, [a-z][a-z0-9-]*)*,? or [a-z][a-z0-9-]*$`)

var parens = lazyre.New(`\s*\([^)]*\)`)

func valueKind(f flagInfo) string {
	if k, ok := kindByFlag[f.Name]; ok {
		return k
	}
	u := strings.TrimSpace(parens.ReplaceAllString(f.Usage, ""))
	if enumUsage.MatchString(u) {
		u = strings.ReplaceAll(u, " or ", ", ")
		return "words:" + strings.Join(strings.Split(u, ", "), " ")
	}
	return ""
}

// argKind reads what a command's arguments are from its ArgsUsage.
func argKind(usage string) string {
	w := strings.Fields(usage)
	if len(w) == 0 {
		return ""
	}
	first := strings.Trim(w[0], "[].")
	switch {
	case first == "NAME":
		return "vm"
	case first == "DOMAIN":
		return "domain"
	case first == "DEV":
		return "vdpa"
	case strings.Contains(first, ".json"), strings.Contains(first, "FILE"):
		return "file"
	}
	return ""
}

// spec is the shell function both scripts share (bash and zsh read the
// same syntax): __NAME_spec PATH sets the words of that command path.
func spec(name string, nodes []node) string {
	var b strings.Builder
	fn := "__" + name
	fmt.Fprintf(&b, "# %s_spec PATH: the subcommands, flags, flags taking a value and\n", fn)
	fmt.Fprintf(&b, "# argument kind of the command path PATH (\"%s vdpa dev\").\n", name)
	fmt.Fprintf(&b, "%s_spec() {\n\tcase \"$1\" in\n", fn)
	for _, n := range nodes {
		fmt.Fprintf(&b, "\t%s)\n", shq(n.Path))
		fmt.Fprintf(&b, "\t\t%s_cmds=%s\n", fn, shq(strings.Join(n.Cmds, " ")))
		fmt.Fprintf(&b, "\t\t%s_flags=%s\n", fn, shq(strings.Join(n.Flags, " ")))
		fmt.Fprintf(&b, "\t\t%s_vflags=%s\n", fn, shq(strings.Join(n.VFlags, " ")))
		fmt.Fprintf(&b, "\t\t%s_args=%s\n\t\t;;\n", fn, shq(n.Args))
	}
	fmt.Fprintf(&b, "\t*) return 1 ;;\n\tesac\n}\n\n")
	// Value kinds per flag, per path.
	fmt.Fprintf(&b, "# %s_kind PATH FLAG: what FLAG of PATH takes.\n", fn)
	fmt.Fprintf(&b, "%s_kind() {\n\tcase \"$1 $2\" in\n", fn)
	for _, n := range nodes {
		names := make([]string, 0, len(n.Values))
		for k := range n.Values {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, f := range names {
			fmt.Fprintf(&b, "\t%s) echo %s ;;\n", shq(n.Path+" "+f), shq(n.Values[f]))
		}
	}
	fmt.Fprintf(&b, "\tesac\n}\n\n")
	// Dynamic values: cheap, bounded, silent on failure.
	fmt.Fprintf(&b, `# %[1]s_values KIND: the candidates of a value kind, one per line.
%[1]s_values() {
	case "$1" in
	vm)
		{
			timeout 3 %[2]s vm list -j 2>/dev/null | grep -o '"name": *"[^"]*"'
			timeout 3 %[2]s list -j 2>/dev/null | grep -o '"vm": *"[^"]*"'
		} | sed 's/.*"\([^"]*\)"$/\1/' | sort -u
		;;
	nic) timeout 3 %[2]s list -j 2>/dev/null | grep -o '"id": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/' | sort -u ;;
	domain) command -v virsh >/dev/null && timeout 3 virsh -q list --all --name 2>/dev/null ;;
	iface) ls /sys/class/net 2>/dev/null ;;
	vdpa) ls /sys/bus/vdpa/devices 2>/dev/null ;;
	words:*)
		local l=${1#words:} nl='
'
		printf '%%s\n' "${l// /$nl}"
		;;
	esac
}

# %[1]s_path: walks the words before the cursor (in %[1]s_words, the
# command name first) and sets %[1]s_path, and %[1]s_expect to the flag
# whose value the cursor is on ("" if none).
%[1]s_walk() {
	local w
	%[1]s_path=%[2]s
	%[1]s_expect=
	%[1]s_spec %[2]s
	for w in "${%[1]s_words[@]}"; do
		if [[ -n $%[1]s_expect ]]; then
			%[1]s_expect=
			continue
		fi
		case $w in
		--) break ;;
		-*=*) ;;
		-*) [[ " $%[1]s_vflags " == *" $w "* ]] && %[1]s_expect=$w ;;
		*)
			if [[ " $%[1]s_cmds " == *" $w "* ]]; then
				%[1]s_path="$%[1]s_path $w"
				%[1]s_spec "$%[1]s_path"
			fi
			;;
		esac
	done
}
`, fn, name)
	return b.String()
}

// shq quotes s for the shell.
func shq(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func bashScript(name string, nodes []node) string {
	fn := "__" + name
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s: commands, flags and, where cheap, values (VM names,\n", name)
	fmt.Fprintf(&b, "# NIC ids from \"%s list -j\", interfaces, vdpa devices).\n", name)
	b.WriteString("# Generated by \"make docs\" from netctl's command tree: do not edit.\n\n")
	b.WriteString(spec(name, nodes))
	fmt.Fprintf(&b, `
_%[2]s() {
	local cur=${COMP_WORDS[COMP_CWORD]} kind
	local %[1]s_cmds %[1]s_flags %[1]s_vflags %[1]s_args %[1]s_path %[1]s_expect
	local -a %[1]s_words=("${COMP_WORDS[@]:1:COMP_CWORD-1}")
	COMPREPLY=()
	%[1]s_walk
	if [[ -n $%[1]s_expect ]]; then
		kind=$(%[1]s_kind "$%[1]s_path" "$%[1]s_expect")
	elif [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$%[1]s_flags" -- "$cur"))
		return 0
	elif [[ -n $%[1]s_cmds ]]; then
		COMPREPLY=($(compgen -W "$%[1]s_cmds" -- "$cur"))
		return 0
	else
		kind=$%[1]s_args
	fi
	case $kind in
	"") ;;
	file) COMPREPLY=($(compgen -f -- "$cur")) ;;
	dir) COMPREPLY=($(compgen -d -- "$cur")) ;;
	*) COMPREPLY=($(compgen -W "$(%[1]s_values "$kind")" -- "$cur")) ;;
	esac
	return 0
}
complete -o filenames -o bashdefault -F _%[2]s %[2]s
`, fn, name)
	return b.String()
}

func zshScript(name string, nodes []node) string {
	fn := "__" + name
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n", name)
	fmt.Fprintf(&b, "# zsh completion for %s: commands, flags and, where cheap, values (VM names,\n", name)
	fmt.Fprintf(&b, "# NIC ids from \"%s list -j\", interfaces, vdpa devices).\n", name)
	b.WriteString("# Generated by \"make docs\" from netctl's command tree: do not edit.\n\n")
	b.WriteString(spec(name, nodes))
	fmt.Fprintf(&b, `
_%[2]s() {
	local cur=${words[CURRENT]} kind
	local %[1]s_cmds %[1]s_flags %[1]s_vflags %[1]s_args %[1]s_path %[1]s_expect
	local -a %[1]s_words
	%[1]s_words=("${(@)words[2,CURRENT-1]}")
	%[1]s_walk
	if [[ -n $%[1]s_expect ]]; then
		kind=$(%[1]s_kind "$%[1]s_path" "$%[1]s_expect")
	elif [[ $cur == -* ]]; then
		compadd -- ${=%[1]s_flags}
		return
	elif [[ -n $%[1]s_cmds ]]; then
		compadd -- ${=%[1]s_cmds}
		return
	else
		kind=$%[1]s_args
	fi
	case $kind in
	"") ;;
	file) _files ;;
	dir) _files -/ ;;
	*) compadd -- ${(f)"$(%[1]s_values "$kind")"} ;;
	esac
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
	_%[2]s "$@"
else
	compdef _%[2]s %[2]s
fi
`, fn, name)
	return b.String()
}
