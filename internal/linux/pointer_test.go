package linux

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/netctl/netctl/internal/srcscan"
	"golang.org/x/sys/unix"
)

// TestIoctlSurvivesStackMoves issues GetU32(FIONREAD) on a pipe holding a
// known number of bytes from goroutines whose stacks grow and shrink
// around the call (random recursion depth right before it, fresh small
// stacks, a GC loop shrinking stacks). The kernel writes the count through
// a pointer to the caller's stack; if that pointer reached the syscall as
// an integer computed before a stack move, the kernel wrote into the old,
// freed stack and the caller sees a stale value. With the uintptr
// conversion handed down through two Go calls (the code before this test),
// about 1.5 % of calls came back wrong; now none may.
//
// It sees the defect in the -race build that make test-unit runs (put
// back, it gave 174 wrong counts in 20000 there). A plain build inlines
// the helpers so that no call, and so no stack move, sits between the
// conversion and the syscall: the defect then does no harm and this test
// passes; TestNoPointerLaundering catches it in every build.
func TestIoctlSurvivesStackMoves(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	const queued = 12345
	if _, err := unix.Write(p[1], make([]byte, queued)); err != nil {
		t.Fatal(err)
	}
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	stop := make(chan struct{})
	var gcs sync.WaitGroup
	gcs.Add(1)
	go func() { // shrink stacks while the calls run
		defer gcs.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	var wrong, calls atomic.Int64
	var wg sync.WaitGroup
	workers := 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range iters / workers {
				done := make(chan struct{})
				depth := r.IntN(256)
				go func() { // a fresh goroutine starts on a small stack
					defer close(done)
					deep(depth, func() {
						v, err := GetU32(p[0], FIONREAD)
						calls.Add(1)
						if err != nil || v != queued {
							wrong.Add(1)
						}
					})
				}()
				<-done
			}
		}()
	}
	wg.Wait()
	close(stop)
	gcs.Wait()
	if calls.Load() == 0 {
		t.Fatal("no ioctl ran")
	}
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d of %d FIONREAD ioctls returned a wrong count: the kernel wrote through a stale stack pointer", n, calls.Load())
	}
}

// deep recurses n frames of 64 bytes each, then calls f: the call lands
// at a different place relative to the stack's end each time, so some
// calls cross a stack-growth boundary inside the ioctl path.
//
//go:noinline
func deep(n int, f func()) {
	var pad [64]byte
	if n > 0 {
		pad[n%64] = byte(n)
		deep(n-1, f)
		if pad[n%64] != byte(n) {
			panic("stack corrupted")
		}
		return
	}
	f()
}

// FIONREAD is not in x/sys for every arch under this name; it is
// TIOCINQ (0x541b) on amd64 and arm64.
const FIONREAD Request = 0x541b

// TestNoPointerLaundering reads every Go file of the module and fails on a
// conversion of a pointer to an integer anywhere but in the argument list
// of a raw system call (unix.Syscall and friends), where Go keeps the
// object alive and in place, and in MappedAddr, which is only for memory
// that never moves. A uintptr that carries an address through ordinary Go
// calls is the stack-move bug this package once had.
func TestNoPointerLaundering(t *testing.T) {
	srcscan.Walk(t, srcscan.Options{MinFiles: 50}, func(path string, fset *token.FileSet, f *ast.File) {
		for _, bad := range launderedPointers(f) {
			t.Errorf("%s: pointer converted to uintptr outside a syscall's argument list; pass an unsafe.Pointer to linux.Ioctl (or use linux.MappedAddr for mmap'd memory)", fset.Position(bad))
		}
	})
}

// launderedPointers returns the positions of uintptr(x) conversions in f
// where x is unsafe.Pointer(...) or a name declared unsafe.Pointer (see
// pointerNames),
// except directly in the arguments of a raw syscall or inside MappedAddr.
func launderedPointers(f *ast.File) []token.Pos {
	var bad []token.Pos
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil || fn.Name.Name == "MappedAddr" && f.Name.Name == "linux" {
			continue
		}
		ptrParams := pointerNames(fn)
		allowed := map[ast.Expr]bool{}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if isRawSyscall(call.Fun) {
				for _, a := range call.Args {
					allowed[a] = true
				}
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "uintptr" && len(call.Args) == 1 && !allowed[call] {
				arg := ast.Unparen(call.Args[0])
				if inner, ok := arg.(*ast.CallExpr); ok && isUnsafePointerType(inner.Fun) {
					bad = append(bad, call.Pos())
				} else if id, ok := arg.(*ast.Ident); ok && ptrParams[id.Name] {
					bad = append(bad, call.Pos())
				}
			}
			return true
		})
	}
	return bad
}

// pointerNames returns the names fn declares as unsafe.Pointer: its
// parameters and results, those of function literals inside it, variables
// declared with that type, and variables assigned unsafe.Pointer(...) or
// unsafe.Add(...) with :=.
func pointerNames(fn *ast.FuncDecl) map[string]bool {
	names := map[string]bool{}
	fields := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			if isUnsafePointerType(f.Type) {
				for _, n := range f.Names {
					names[n.Name] = true
				}
			}
		}
	}
	fields(fn.Type.Params)
	fields(fn.Type.Results)
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			fields(n.Type.Params)
			fields(n.Type.Results)
		case *ast.ValueSpec:
			if n.Type != nil && isUnsafePointerType(n.Type) {
				for _, id := range n.Names {
					names[id.Name] = true
				}
			}
		case *ast.AssignStmt:
			if n.Tok != token.DEFINE || len(n.Lhs) != len(n.Rhs) {
				return true
			}
			for i, r := range n.Rhs {
				call, ok := ast.Unparen(r).(*ast.CallExpr)
				if !ok {
					continue
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && isUnsafePointerType(sel) || ok && sel.Sel.Name == "Add" && isUnsafePkg(sel.X) {
					if id, ok := n.Lhs[i].(*ast.Ident); ok {
						names[id.Name] = true
					}
				}
			}
		}
		return true
	})
	return names
}

func isUnsafePkg(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "unsafe"
}

func isUnsafePointerType(e ast.Expr) bool {
	sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "unsafe" && sel.Sel.Name == "Pointer"
}

func isRawSyscall(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok || pkg.Name != "unix" && pkg.Name != "syscall" {
		return false
	}
	switch sel.Sel.Name {
	case "Syscall", "Syscall6", "RawSyscall", "RawSyscall6", "RawSyscallNoError", "SyscallNoError":
		return true
	}
	return false
}

// TestLaunderDetector checks the detector itself on the pattern it must
// catch and the ones it must allow.
func TestLaunderDetector(t *testing.T) {
	src := `package x
import ("unsafe"; "golang.org/x/sys/unix")
func bad1(p *int) uintptr { return uintptr(unsafe.Pointer(p)) }
func bad2(fd int, arg unsafe.Pointer) { value(fd, uintptr(arg)) }
func ok1(fd int, arg unsafe.Pointer) { unix.Syscall(16, uintptr(fd), 0, uintptr(arg)) }
func ok2(v uintptr) uintptr { return uintptr(v) }
func bad3(fd int, x *int) { p := unsafe.Pointer(x); value(fd, uintptr(p)) }
func bad4(fd int, b []byte) { var p unsafe.Pointer = unsafe.Pointer(&b[0]); value(fd, uintptr(p)) }
func bad5(fd int, b []byte) { p := unsafe.Add(unsafe.Pointer(&b[0]), 4); value(fd, uintptr(p)) }
func bad6(fd int) { f := func(p unsafe.Pointer) uintptr { return uintptr(p) }; _ = f }
func ok3(fd int, x *int) { p := unsafe.Pointer(x); unix.Syscall(16, uintptr(fd), 0, uintptr(p)) }
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(launderedPointers(f)); got != 6 {
		t.Fatalf("detector found %d laundered pointers, want 6 (bad1 to bad6)", got)
	}
}
