package qemu

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
)

var lookPath = exec.LookPath

// qcow2Backing reads the backing file name from a qcow2 header ("" when
// it has none).
func qcow2Backing(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var hdr [20]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return "", err
	}
	if string(hdr[:4]) != "QFI\xfb" {
		return "", errors.New("not a qcow2 file")
	}
	off := binary.BigEndian.Uint64(hdr[8:16])
	size := binary.BigEndian.Uint32(hdr[16:20])
	if off == 0 || size == 0 {
		return "", nil
	}
	if size > 4096 {
		return "", errors.New("qcow2 backing file name too long")
	}
	name := make([]byte, size)
	if _, err := f.ReadAt(name, int64(off)); err != nil {
		return "", err
	}
	return string(name), nil
}
