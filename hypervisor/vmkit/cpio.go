package vmkit

import (
	"fmt"
	"io"
)

// NewCPIOWriter returns a writer of a newc archive to w.
func NewCPIOWriter(w io.Writer) *CPIOWriter { return &CPIOWriter{w: w, ino: 1} }

// CPIOWriter writes the "newc" (070701) cpio format the kernel unpacks as
// an initramfs. The first error sticks: Err reports it after the last
// entry.
type CPIOWriter struct {
	w   io.Writer
	ino int
	n   int64
	err error
}

func (c *CPIOWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *CPIOWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// Entry writes one file; mode includes the type bits, and rdev major and
// minor are used for device nodes. An archive ends with the entry
// "TRAILER!!!".
func (c *CPIOWriter) Entry(name string, mode uint32, major, minor int, data []byte) {
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	ino := c.ino
	c.ino++
	if name == "TRAILER!!!" {
		ino, nlink = 0, 1
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, major, minor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}

// Err is the first error writing the archive met, if any.
func (c *CPIOWriter) Err() error { return c.err }
