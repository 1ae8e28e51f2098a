// Package docs_test checks the user documentation's relative links: every
// link in README.md, CHANGELOG.md, docs/**/*.md and deploy/**/*.md that is
// not a URL names a file or directory that exists in the repository, and
// a #fragment on a markdown page names one of its headings.
package docs_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = ".."

// inlineLink is [text](target) or [text](target "title"); refLink is a
// reference definition, [label]: target.
var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// pages are the markdown files whose links are checked, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md", "CHANGELOG.md"}
	for _, dir := range []string{"docs", "deploy"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(p, ".md") {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				out = append(out, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// links are the link targets of a markdown page, with their line numbers;
// fenced code blocks and code spans are left out (they show text, not
// links).
type link struct {
	line   int
	target string
}

func links(src []byte) []link {
	var out []link
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		trim := strings.TrimLeft(l, " ")
		if fence != "" {
			if strings.HasPrefix(trim, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~") {
			fence = trim[:3]
			continue
		}
		l = codeSpan.ReplaceAllString(l, "")
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			out = append(out, link{n, m[1]})
		}
		if m := refLink.FindStringSubmatch(l); m != nil {
			out = append(out, link{n, m[1]})
		}
	}
	return out
}

// anchors are the GitHub-style ids of a markdown page's headings.
func anchors(src []byte) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, l := range strings.Split(string(src), "\n") {
		trim := strings.TrimLeft(l, " ")
		if fence != "" {
			if strings.HasPrefix(trim, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~") {
			fence = trim[:3]
			continue
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
				b.WriteRune(r)
			}
		}
		id := b.String()
		if k := seen[id]; k > 0 {
			ids[id+"-"+string(rune('0'+k))] = true
		}
		seen[id]++
		ids[id] = true
	}
	return ids
}

func TestRelativeLinks(t *testing.T) {
	ps := pages(t)
	if len(ps) < 5 {
		t.Fatalf("found only %v: is the test run from docs/?", ps)
	}
	checked := 0
	for _, p := range ps {
		src, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(src) {
			target := l.target
			if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
				continue // a URL
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := p // "#x": this page
			if file != "" {
				if strings.HasPrefix(file, "/") {
					t.Errorf("%s:%d: link %q is absolute: make it relative to the page", p, l.line, target)
					continue
				}
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(p), file))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", p, l.line, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", p, l.line, target, dest)
					continue
				}
			}
			checked++
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			dsrc, err := os.ReadFile(filepath.Join(root, dest))
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", p, l.line, target, err)
				continue
			}
			if !anchors(dsrc)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", p, l.line, target, dest, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link checked: is the link pattern right?")
	}
}

// TestLinkParser: the parser finds what a page links to and nothing in
// code.
func TestLinkParser(t *testing.T) {
	src := []byte("see [a](docs/a.md) and [b](b.md#sec \"t\") and ![img](i.png)\n" +
		"`[not](code.md)`\n```\n[not](fenced.md)\n```\n[ref]: ref.md\n")
	var got []string
	for _, l := range links(src) {
		got = append(got, l.target)
	}
	if want := "docs/a.md b.md#sec i.png ref.md"; strings.Join(got, " ") != want {
		t.Fatalf("links %q, want %q", strings.Join(got, " "), want)
	}
	ids := anchors([]byte("# Set-up on a fresh Debian 12 machine: two commands\n## `make test`, again\n## Again\n## Again\n"))
	for _, w := range []string{"set-up-on-a-fresh-debian-12-machine-two-commands", "make-test-again", "again", "again-1"} {
		if !ids[w] {
			t.Errorf("no anchor %q in %v", w, ids)
		}
	}
}
