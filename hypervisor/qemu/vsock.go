package qemu

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/mdlayher/vsock"

	"paddock.dev/paddock/guest/vmchan"
)

// Agent channel transports (snapMeta.Channel, Options["channel"]).
const (
	ChannelSerial = "serial" // virtio-serial port over a unix socket QEMU serves
	ChannelVsock  = "vsock"  // vhost-vsock: the host dials the guest's CID
)

// devicesPCI is snapMeta.Devices for machines on the PCIe bus.
const devicesPCI = "pci"

// vhostVsockDevice is the host device vhost-vsock needs.
var vhostVsockDevice = "/dev/vhost-vsock"

// channelFor picks the agent channel of a new machine: Options["channel"]
// when set, else vsock where /dev/vhost-vsock can be opened (the probe saw
// it), else virtio-serial.
func channelFor(option string, vhostVsock bool) (string, error) {
	switch option {
	case ChannelSerial:
		return ChannelSerial, nil
	case ChannelVsock:
		if !vhostVsock {
			return "", fmt.Errorf("qemu: channel %q asked for, but %s is missing", ChannelVsock, vhostVsockDevice)
		}
		return ChannelVsock, nil
	case "":
	default:
		return "", fmt.Errorf("qemu: channel %q: use %q or %q", option, ChannelSerial, ChannelVsock)
	}
	if vhostVsock && canOpen(vhostVsockDevice) {
		return ChannelVsock, nil
	}
	return ChannelSerial, nil
}

func canOpen(dev string) bool {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// snapChannel is a snapshot's channel ("" in older snapshots: serial).
func snapChannel(meta snapMeta) string {
	if meta.Channel == "" {
		return ChannelSerial
	}
	return meta.Channel
}

// newCID returns a random guest CID: 3 and up (0-2 are reserved), below
// 2^31. A CID another VM on the host holds makes QEMU fail at start
// (cidInUse), and the caller draws again.
func newCID() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return 3 + binary.LittleEndian.Uint32(b[:])%(1<<31-3)
}

// cidInUse says whether QEMU refused a guest CID because it is taken.
func cidInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "guest cid") && strings.Contains(strings.ToLower(err.Error()), "in use")
}

// dialVsock connects to the guest agent's vsock port, retrying while the
// guest is still booting (nothing listens yet) until ctx ends or exited
// closes.
func dialVsock(ctx context.Context, cid uint32, exited <-chan struct{}) (net.Conn, error) {
	for {
		c, err := vsock.Dial(cid, vmchan.VsockPort, nil)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("qemu: agent channel (vsock cid %d port %d): %w", cid, vmchan.VsockPort, err)
		case <-exited:
			return nil, fmt.Errorf("qemu exited while dialling the agent over vsock: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
