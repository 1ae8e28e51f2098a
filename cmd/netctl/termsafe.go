package main

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Text from outside (a QEMU's -name and error text, a monitor holder's
// comm, a tap name read from fdinfo, a domain name) reaches the
// operator's terminal in tables and error lines. An ESC in it could start
// a sequence that clears, retitles or rewrites the terminal; a bidi
// override could make a line read differently from what it holds. Two
// layers keep that text inert:
//   - termSafe escapes one value for a table cell: every control character
//     (newline and tab too, so a value stays in its cell), bidi controls
//     and bytes that are not UTF-8;
//   - safeWriter, put by runApp around the command's stdout and stderr,
//     escapes whatever still reaches them, in human output and in JSON
//     alike (see escapeOutput): nothing a command prints can carry a raw
//     control character other than newline and tab.

// termSafe shows s on a terminal as text: a control character in it (ESC
// starting a sequence that clears or retitles the terminal, CR, C1
// controls), a bidi override or a byte that is not UTF-8 is written
// escaped (\x1b; \u009b and \u202e; \xff), never as it is: the same
// escapes as escapeOutput, plus newline and tab.
func termSafe(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x20:
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r): // DEL, C1, bidi
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// escapeOutput is p with what must not reach a terminal escaped:
//   - a C0 control other than newline and tab: \x1b;
//   - a byte that does not start a whole UTF-8 sequence within p: \xff;
//   - DEL, a C1 control (U+0080 to U+009F) or a bidi control (U+202E,
//     U+2066, ...): \u007f, \u009b, \u202e.
//
// The same works for JSON: encoding/json writes C0 controls as \u001b
// and bytes that are not UTF-8 as U+FFFD, but DEL, C1 and bidi controls
// raw, and those can only stand inside a JSON string, where \u009b is
// the same character. p comes back as it is when nothing needs escaping.
func escapeOutput(p []byte) []byte {
	i := 0
	for i < len(p) {
		if c := p[i]; c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
			i++
			continue
		}
		r, n := utf8.DecodeRune(p[i:])
		if needsEscape(r, n) {
			break
		}
		i += n
	}
	if i == len(p) {
		return p
	}
	out := make([]byte, 0, len(p)+16)
	out = append(out, p[:i]...)
	for i < len(p) {
		r, n := utf8.DecodeRune(p[i:])
		switch {
		case !needsEscape(r, n):
			out = append(out, p[i:i+n]...)
		case r == utf8.RuneError && n <= 1, r < 0x20:
			out = fmt.Appendf(out, "\\x%02x", p[i])
		default:
			out = fmt.Appendf(out, "\\u%04x", r)
		}
		i += n
	}
	return out
}

// needsEscape says whether the rune r of n bytes must be escaped.
func needsEscape(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n <= 1:
		return true
	case r == '\n' || r == '\t':
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// safeWriter writes to w what escapeOutput leaves of each Write. A
// multi-byte sequence split across two Writes is escaped byte by byte
// (netctl writes whole strings, so that does not happen in its output).
// wrote, if set, is set at the first byte written (handover.go).
type safeWriter struct {
	w     io.Writer
	wrote *atomic.Bool
}

func (s *safeWriter) Write(p []byte) (int, error) {
	if s.wrote != nil && len(p) > 0 {
		s.wrote.Store(true)
	}
	if _, err := s.w.Write(escapeOutput(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// rawWriter is the writer under a safeWriter, for netctl's own control
// sequences (netctl stats redrawing the terminal).
func rawWriter(w io.Writer) io.Writer {
	if s, ok := w.(*safeWriter); ok {
		return s.w
	}
	return w
}
