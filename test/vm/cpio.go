package vm

import (
	"fmt"
	"io"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks as an
// initramfs (Documentation/driver-api/early-userspace/buffer-format.rst).
type cpioWriter struct {
	w   io.Writer
	ino uint32
	off int64
	err error
}

const (
	modeDir  = 0o040000
	modeFile = 0o100000
	modeChr  = 0o020000
)

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.off += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.off % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte, rmaj, rmin uint32) {
	c.ino++
	nlink := uint32(1)
	if mode&modeDir != 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmaj, rmin, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}

// Dir, File and CharDev add one entry each; names have no leading slash.
func (c *cpioWriter) Dir(name string)                         { c.entry(name, modeDir|0o755, nil, 0, 0) }
func (c *cpioWriter) File(name string, perm uint32, b []byte) { c.entry(name, modeFile|perm, b, 0, 0) }
func (c *cpioWriter) CharDev(name string, maj, min uint32) {
	c.entry(name, modeChr|0o600, nil, maj, min)
}

// Close writes the trailer and returns the first error.
func (c *cpioWriter) Close() error {
	c.entry("TRAILER!!!", 0, nil, 0, 0)
	return c.err
}

// CPIO is the newc writer, exported for test/l2, which builds its nested
// guest's initramfs with it.
type CPIO = cpioWriter

// NewCPIO returns a CPIO writing to w; Close writes the trailer.
func NewCPIO(w io.Writer) *CPIO { return &cpioWriter{w: w} }
