// Package lazyre is a regular expression compiled on its first use, not at
// package initialisation: every netctl call (a libvirt hook, a CNI call)
// initialises every package it links, and most never match these.
package lazyre

import (
	"regexp"
	"sync"
)

// RE is a regular expression compiled on first use. Its pattern is a
// constant of the program: a bad one panics there, as regexp.MustCompile
// would at init (TestPatterns in each package's tests catches it first).
type RE struct {
	re func() *regexp.Regexp
}

// New is the expression pattern, compiled when first used.
func New(pattern string) *RE {
	return &RE{re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })}
}

// Regexp is the compiled expression.
func (r *RE) Regexp() *regexp.Regexp { return r.re() }

// MatchString reports whether s contains a match.
func (r *RE) MatchString(s string) bool { return r.re().MatchString(s) }

// FindStringSubmatchIndex is regexp's.
func (r *RE) FindStringSubmatchIndex(s string) []int { return r.re().FindStringSubmatchIndex(s) }

// ReplaceAllString is regexp's.
func (r *RE) ReplaceAllString(src, repl string) string { return r.re().ReplaceAllString(src, repl) }

// String is the pattern.
func (r *RE) String() string { return r.re().String() }
