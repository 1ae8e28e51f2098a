package macvtap

// SetTapOpensHook sets tapOpensHook for a test and returns the undo.
func SetTapOpensHook(f func()) func() {
	tapOpensHook = f
	return func() { tapOpensHook = nil }
}
