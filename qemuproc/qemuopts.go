package qemuproc

import "strings"

// option is one key=value of a QEMU option argument.
type option struct{ key, value string }

// splitOpts splits a QemuOpts argument ("socket,id=mon0,path=/a,,b,server")
// the way QEMU's util/qemu-option.c does: elements are separated by single
// commas and ",," is a literal comma; the first element without '=' is the
// value of implied (when implied is not ""); any other element without '='
// is a boolean: "key" means key=on and "nokey" key=off (QEMU's deprecated
// shorthand, still in libvirt's older command lines: "server,nowait").
func splitOpts(arg, implied string) []option {
	var opts []option
	for i, elem := range splitEscaped(arg) {
		k, v, ok := strings.Cut(elem, "=")
		switch {
		case ok:
			opts = append(opts, option{k, v})
		case i == 0 && implied != "":
			opts = append(opts, option{implied, elem})
		case strings.HasPrefix(elem, "no") && len(elem) > 2:
			opts = append(opts, option{elem[2:], "off"})
		default:
			opts = append(opts, option{elem, "on"})
		}
	}
	return opts
}

// splitEscaped splits s at single commas and turns ",," into ",". The
// '=' of a key stays in its element; a doubled comma inside a value is
// the only escape QEMU has.
func splitEscaped(s string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != ',' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == ',' {
			b.WriteByte(',')
			i++
			continue
		}
		out = append(out, b.String())
		b.Reset()
	}
	return append(out, b.String())
}

// get returns the last value of key (QEMU keeps the last of repeated
// keys) and whether it was there.
func get(opts []option, key string) (string, bool) {
	v, ok := "", false
	for _, o := range opts {
		if o.key == key {
			v, ok = o.value, true
		}
	}
	return v, ok
}

// boolOpt is a QEMU boolean (on/off, yes/no, true/false); def when absent
// or not a boolean.
func boolOpt(opts []option, key string, def bool) bool {
	v, ok := get(opts, key)
	if !ok {
		return def
	}
	switch v {
	case "on", "yes", "true", "y":
		return true
	case "off", "no", "false", "n":
		return false
	}
	return def
}
