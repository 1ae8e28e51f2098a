package state

// Hand-written checks of the identifiers a record holds. Each is what a
// regular expression said before (ident_test.go holds them to it): every
// attach, detach and hook call validates records, and compiling the
// expressions cost each fresh process more than the checks themselves.

// IsQEMUID says whether s is a QEMU id (id_wellformed: a letter, then
// letters, digits, '-', '.' or '_') of at most max bytes: the expression
// ^[A-Za-z][A-Za-z0-9_.-]{0,max-1}$.
func IsQEMUID(s string, max int) bool {
	if len(s) == 0 || len(s) > max || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLetter(c) && !(c >= '0' && c <= '9') && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// IsUUID says whether s is a UUID in canonical lower case (libvirt's, the
// kernel's boot id): ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// isIfname says whether s can be an interface name: 1 to 15 characters,
// none of them '/', ':' or white space: ^[^/\s:]{1,15}$, which counts
// characters (an invalid UTF-8 byte is one) and whose \s is [\t\n\f\r ].
func isIfname(s string) bool {
	n := 0
	for _, r := range s {
		switch r {
		case '/', ':', '\t', '\n', '\f', '\r', ' ':
			return false
		}
		n++
	}
	return n >= 1 && n <= 15
}
