/* setup.c: the minimal C program netctl's queue-pair setup is compared with
 * (make bench). It does exactly the ioctls vhostnet.NewNIC and NIC.Close do
 * for one queue pair over a tap, in a loop, and prints the time per setup
 * (open to the second SET_BACKEND) and per teardown (SET_BACKEND -1,
 * GET_VRING_BASE, close: close waits for an RCU grace period) as one JSON
 * object. Usage: setup-c ITERATIONS
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/vhost.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MEM (16 << 20)
#define CHECK(x) do { if ((x) < 0) { perror(#x); exit(1); } } while (0)

int main(int argc, char **argv) {
	int iters = argc > 1 ? atoi(argv[1]) : 1000;
	int tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	CHECK(tap);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "csetup0");
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	CHECK(ioctl(tap, TUNSETIFF, &ifr));
	int hsz = 12;
	CHECK(ioctl(tap, TUNSETVNETHDRSZ, &hsz));
	int mfd = memfd_create("csetup", MFD_CLOEXEC);
	CHECK(mfd);
	CHECK(ftruncate(mfd, MEM));
	char *mem = mmap(NULL, MEM, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (mem == MAP_FAILED) { perror("mmap"); return 1; }
	int kick[2], call[2];
	for (int i = 0; i < 2; i++) {
		kick[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		call[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	}
	struct { struct vhost_memory m; struct vhost_memory_region r; } table;
	memset(&table, 0, sizeof table);
	table.m.nregions = 1;
	table.r.guest_phys_addr = 0;
	table.r.memory_size = MEM;
	table.r.userspace_addr = (uintptr_t)mem;
	struct timespec t0, t1, t2;
	double setup = 0, teardown = 0;
	for (int it = 0; it < iters; it++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int fd = open("/dev/vhost-net", O_RDWR | O_CLOEXEC);
		CHECK(fd);
		CHECK(ioctl(fd, VHOST_SET_OWNER, NULL));
		uint64_t f = 1ULL << 32; /* VERSION_1 */
		CHECK(ioctl(fd, VHOST_SET_FEATURES, &f));
		CHECK(ioctl(fd, VHOST_SET_MEM_TABLE, &table));
		for (unsigned vq = 0; vq < 2; vq++) {
			char *ring = mem + vq * 3 * 4096;
			struct vhost_vring_state num = { vq, 256 }, base = { vq, 0 };
			struct vhost_vring_addr addr = { .index = vq, .desc_user_addr = (uintptr_t)ring,
				.avail_user_addr = (uintptr_t)ring + 4096, .used_user_addr = (uintptr_t)ring + 8192 };
			struct vhost_vring_file k = { vq, kick[vq] }, c = { vq, call[vq] }, e = { vq, -1 };
			CHECK(ioctl(fd, VHOST_SET_VRING_NUM, &num));
			CHECK(ioctl(fd, VHOST_SET_VRING_BASE, &base));
			CHECK(ioctl(fd, VHOST_SET_VRING_ADDR, &addr));
			CHECK(ioctl(fd, VHOST_SET_VRING_KICK, &k));
			CHECK(ioctl(fd, VHOST_SET_VRING_CALL, &c));
			CHECK(ioctl(fd, VHOST_SET_VRING_ERR, &e));
		}
		for (unsigned vq = 0; vq < 2; vq++) {
			struct vhost_vring_file b = { vq, tap };
			CHECK(ioctl(fd, VHOST_NET_SET_BACKEND, &b));
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		for (unsigned vq = 0; vq < 2; vq++) {
			struct vhost_vring_file b = { vq, -1 };
			struct vhost_vring_state s = { vq, 0 };
			CHECK(ioctl(fd, VHOST_NET_SET_BACKEND, &b));
			CHECK(ioctl(fd, VHOST_GET_VRING_BASE, &s));
		}
		close(fd);
		clock_gettime(CLOCK_MONOTONIC, &t2);
		setup += (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
		teardown += (t2.tv_sec - t1.tv_sec) * 1e9 + (t2.tv_nsec - t1.tv_nsec);
	}
	printf("{\"ns_per_setup\": %.0f, \"ns_setup\": %.0f, \"ns_teardown\": %.0f, \"iterations\": %d}\n",
	       (setup + teardown) / iters, setup / iters, teardown / iters, iters);
	return 0;
}
