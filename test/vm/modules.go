package vm

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// moduleTree is the modules directory of an unpacked linux-image package.
type moduleTree struct {
	dir     string            // .../lib/modules/<release>
	release string            // uname -r of that kernel
	files   map[string]string // module name -> path (.ko, .ko.xz or .ko.zst)
	builtin map[string]bool
}

func modName(path string) string {
	b := filepath.Base(path)
	for _, ext := range []string{".ko.xz", ".ko.zst", ".ko.gz", ".ko"} {
		b = strings.TrimSuffix(b, ext)
	}
	return strings.ReplaceAll(b, "-", "_")
}

func openModuleTree(root string) (*moduleTree, error) {
	var dirs []string
	for _, pat := range []string{"usr/lib/modules/*", "lib/modules/*"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		dirs = append(dirs, m...)
	}
	if len(dirs) != 1 {
		return nil, fmt.Errorf("vm: want one modules directory in %s, found %d", root, len(dirs))
	}
	t := &moduleTree{dir: dirs[0], release: filepath.Base(dirs[0]), files: map[string]string{}, builtin: map[string]bool{}}
	err := filepath.WalkDir(filepath.Join(t.dir, "kernel"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.Contains(d.Name(), ".ko") {
			t.files[modName(p)] = p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if f, err := os.Open(filepath.Join(t.dir, "modules.builtin")); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			t.builtin[modName(s.Text())] = true
		}
		f.Close()
	}
	return t, nil
}

// read returns the module's ELF image, decompressed.
func (t *moduleTree) read(name string) ([]byte, error) {
	p := t.files[name]
	var prog string
	switch {
	case strings.HasSuffix(p, ".xz"):
		prog = "xz"
	case strings.HasSuffix(p, ".zst"):
		prog = "zstd"
	case strings.HasSuffix(p, ".gz"):
		prog = "gzip"
	default:
		return os.ReadFile(p)
	}
	out, err := exec.Command(prog, "-dc", p).Output()
	if err != nil {
		return nil, fmt.Errorf("vm: %s -dc %s: %w (is %s installed? make vm-deps installs it)", prog, p, err, prog)
	}
	return out, nil
}

// depends reads "depends=" from the module's .modinfo section.
func depends(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, err
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			var ds []string
			for _, d := range strings.Split(string(v), ",") {
				ds = append(ds, strings.ReplaceAll(d, "-", "_"))
			}
			return ds, nil
		}
	}
	return nil, nil
}

// moduleSet is the outcome of resolving the wanted modules of a kernel.
type moduleSet struct {
	Order   []string          // load order, dependencies first
	Images  map[string][]byte // name -> decompressed .ko
	Builtin []string          // wanted modules built into the kernel
	Missing []string          // wanted modules this kernel does not have
}

// resolve orders want and their dependencies (depth first, so each module
// follows what it needs and otherwise keeps the order of want).
func resolve(want []string, isBuiltin func(string) bool, has func(string) bool, deps func(string) ([]string, error)) (order, builtin, missing []string, err error) {
	seen := map[string]bool{}
	var visit func(string, bool) error
	visit = func(m string, wanted bool) error {
		if seen[m] {
			return nil
		}
		seen[m] = true
		switch {
		case isBuiltin(m):
			if wanted {
				builtin = append(builtin, m)
			}
			return nil
		case !has(m):
			if wanted {
				missing = append(missing, m)
				return nil
			}
			return fmt.Errorf("vm: module dependency %s not found", m)
		}
		ds, err := deps(m)
		if err != nil {
			return fmt.Errorf("vm: modinfo of %s: %w", m, err)
		}
		for _, d := range ds {
			if err := visit(d, false); err != nil {
				return fmt.Errorf("%w (needed by %s)", err, m)
			}
		}
		order = append(order, m)
		return nil
	}
	for _, m := range want {
		if err := visit(m, true); err != nil {
			return nil, nil, nil, err
		}
	}
	return order, builtin, missing, nil
}

func (t *moduleTree) resolve(want []string) (*moduleSet, error) {
	s := &moduleSet{Images: map[string][]byte{}}
	deps := func(m string) ([]string, error) {
		ko, err := t.read(m)
		if err != nil {
			return nil, err
		}
		s.Images[m] = ko
		return depends(ko)
	}
	var err error
	s.Order, s.Builtin, s.Missing, err = resolve(want,
		func(m string) bool { return t.builtin[m] },
		func(m string) bool { _, ok := t.files[m]; return ok },
		deps)
	return s, err
}
