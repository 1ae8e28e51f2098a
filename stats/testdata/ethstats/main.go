// Command ethstats prints a network interface's own statistics, one
// "name value" per line: what `ethtool -S IFACE` shows (ETHTOOL_GSTRINGS
// and ETHTOOL_GSTATS through SIOCETHTOOL), then the per-queue counters of
// the netdev family (`ynl --family netdev --dump qstats-get` with scope
// queue) as rx_queue_N_packets/tx_queue_N_packets. Linux 6.12's
// virtio_net reports per-queue packets and bytes only there; its
// ethtool -S keeps drops, kicks and xdp counters. The stats tests build
// it static and run it in the test guest, whose busybox has no ethtool.
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"unsafe"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// include/uapi/linux/netdev.h (Linux 6.12)
const (
	netdevCmdQstatsGet       = 12
	qstatsIfindex            = 1
	qstatsQueueType          = 2
	qstatsQueueID            = 3
	qstatsScope              = 4
	qstatsRxPackets          = 8
	qstatsRxBytes            = 9
	qstatsTxPackets          = 10
	qstatsTxBytes            = 11
	qstatsScopeQueue         = 1
	queueTypeRx, queueTypeTx = 0, 1
)

// qstats prints the netdev family's per-queue counters of name.
func qstats(name string) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "qstats:", err)
		return
	}
	c, err := genetlink.Dial(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "qstats:", err)
		return
	}
	defer c.Close()
	fam, err := c.GetFamily("netdev")
	if err != nil {
		fmt.Fprintln(os.Stderr, "qstats: netdev family:", err)
		return
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(qstatsIfindex, uint32(ifi.Index))
	ae.Uint32(qstatsScope, qstatsScopeQueue)
	b, err := ae.Encode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "qstats:", err)
		return
	}
	msgs, err := c.Execute(genetlink.Message{Header: genetlink.Header{Command: netdevCmdQstatsGet, Version: fam.Version}, Data: b},
		fam.ID, netlink.Request|netlink.Dump)
	if err != nil {
		fmt.Fprintln(os.Stderr, "qstats:", err)
		return
	}
	for _, m := range msgs {
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			continue
		}
		typ, id := -1, -1
		vals := map[uint16]uint64{}
		for ad.Next() {
			switch ad.Type() {
			case qstatsQueueType:
				typ = int(ad.Uint32())
			case qstatsQueueID:
				id = int(ad.Uint32())
			case qstatsRxPackets, qstatsRxBytes, qstatsTxPackets, qstatsTxBytes:
				if d := ad.Bytes(); len(d) == 8 {
					vals[ad.Type()] = binary.NativeEndian.Uint64(d)
				} else if len(d) == 4 {
					vals[ad.Type()] = uint64(binary.NativeEndian.Uint32(d))
				}
			}
		}
		switch typ {
		case queueTypeRx:
			fmt.Printf("rx_queue_%d_packets %d\nrx_queue_%d_bytes %d\n", id, vals[qstatsRxPackets], id, vals[qstatsRxBytes])
		case queueTypeTx:
			fmt.Printf("tx_queue_%d_packets %d\ntx_queue_%d_bytes %d\n", id, vals[qstatsTxPackets], id, vals[qstatsTxBytes])
		}
	}
}

const (
	ethtoolGStrings = 0x1b
	ethtoolGStats   = 0x1d
	ethSSStats      = 1
)

type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

func ethtool(fd int, name string, buf []byte) error {
	var ifr ifreq
	copy(ifr.name[:], name)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return e
	}
	return nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ethstats IFACE")
		os.Exit(2)
	}
	name := os.Args[1]
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drvinfo:", err)
		os.Exit(1)
	}
	n := int(info.N_stats)
	strs := make([]byte, 12+n*32)
	binary.LittleEndian.PutUint32(strs[0:], ethtoolGStrings)
	binary.LittleEndian.PutUint32(strs[4:], ethSSStats)
	binary.LittleEndian.PutUint32(strs[8:], uint32(n))
	if err := ethtool(fd, name, strs); err != nil {
		fmt.Fprintln(os.Stderr, "gstrings:", err)
		os.Exit(1)
	}
	vals := make([]byte, 8+n*8)
	binary.LittleEndian.PutUint32(vals[0:], ethtoolGStats)
	binary.LittleEndian.PutUint32(vals[4:], uint32(n))
	if err := ethtool(fd, name, vals); err != nil {
		fmt.Fprintln(os.Stderr, "gstats:", err)
		os.Exit(1)
	}
	defer qstats(name)
	for i := 0; i < n; i++ {
		s := strs[12+i*32 : 12+(i+1)*32]
		if j := bytes.IndexByte(s, 0); j >= 0 {
			s = s[:j]
		}
		fmt.Printf("%s %d\n", s, binary.LittleEndian.Uint64(vals[8+i*8:]))
	}
}
