package vufront

import (
	"fmt"
	"net"
)

// QEMUNIC is QEMU as the frontend: the options that give a QEMU a
// virtio-net-pci NIC (qdev id) on a vhost-user netdev whose backend
// serves socket (QEMU is the client and, with reconnect=1, dials again
// a second after the backend went away). queues > 1 adds mq=on and the
// vectors a multiqueue NIC needs. The guest RAM must be a shared memfd
// or file (QEMU shares only fd-backed RAM with a vhost-user backend):
// l2.Firmware.SharedMemory, or -object
// memory-backend-memfd,id=mem,size=...,share=on -machine memory-backend=mem.
//
// QEMU 7.2 does not finish starting (no QMP greeting) until the backend
// has answered the netdev's handshake: start the backend first.
func QEMUNIC(id, socket string, queues int, mac net.HardwareAddr) []string {
	dev := fmt.Sprintf("virtio-net-pci,netdev=vu-%s,id=%s,mac=%s", id, id, mac)
	if queues > 1 {
		dev += fmt.Sprintf(",mq=on,vectors=%d", 2*queues+2)
	}
	return []string{
		"-chardev", fmt.Sprintf("socket,id=chr-%s,path=%s,reconnect=1", id, socket),
		"-netdev", fmt.Sprintf("vhost-user,id=vu-%s,chardev=chr-%s,queues=%d", id, id, max(queues, 1)),
		"-device", dev,
	}
}
