/* vdpa_setup.c: the minimal C program netctl's vhost-vdpa bring-up is
 * compared with (make bench). It does the calls vdpaBringUp in the bench
 * does, in a loop, on /dev/vhost-vdpa-N (a VDUSE device the bench serves),
 * and prints the time per bring-up as JSON.
 * Usage: vdpa-setup-c DEVICE ITERATIONS
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/vhost.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MEM (4 << 20)
#define CHECK(x) do { if ((x) < 0) { perror(#x); exit(1); } } while (0)

static void iotlb(int fd, uint8_t type, uint64_t iova, uint64_t size, uint64_t uaddr) {
	struct vhost_msg_v2 m;
	memset(&m, 0, sizeof m);
	m.type = VHOST_IOTLB_MSG_V2;
	m.iotlb.iova = iova;
	m.iotlb.size = size;
	m.iotlb.uaddr = uaddr;
	m.iotlb.perm = VHOST_ACCESS_RW;
	m.iotlb.type = type;
	if (write(fd, &m, sizeof m) != sizeof m) { perror("iotlb write"); exit(1); }
}

/* A status write, read back as QEMU's vhost_vdpa_add_status does (and
 * netctl's SetStatus): a device may refuse a bit without the ioctl failing. */
static void status(int fd, uint8_t s) {
	CHECK(ioctl(fd, VHOST_VDPA_SET_STATUS, &s));
	if (s == 0)
		return;
	uint8_t got;
	CHECK(ioctl(fd, VHOST_VDPA_GET_STATUS, &got));
	if ((got & s) != s) { fprintf(stderr, "status %#x did not stick: %#x\n", s, got); exit(1); }
}

int main(int argc, char **argv) {
	const char *dev = argv[1];
	int iters = argc > 2 ? atoi(argv[2]) : 100;
	int mfd = memfd_create("cvdpa", MFD_CLOEXEC);
	CHECK(mfd);
	CHECK(ftruncate(mfd, MEM));
	char *mem = mmap(NULL, MEM, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	int kick[2], call[2];
	for (int i = 0; i < 2; i++) {
		kick[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		call[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int it = 0; it < iters; it++) {
		int fd = open(dev, O_RDWR | O_CLOEXEC);
		CHECK(fd);
		CHECK(ioctl(fd, VHOST_SET_OWNER, NULL));
		uint64_t bf;
		CHECK(ioctl(fd, VHOST_GET_BACKEND_FEATURES, &bf));
		bf &= (1ULL << VHOST_BACKEND_F_IOTLB_MSG_V2) | (1ULL << VHOST_BACKEND_F_IOTLB_BATCH);
		CHECK(ioctl(fd, VHOST_SET_BACKEND_FEATURES, &bf));
		uint64_t f;
		CHECK(ioctl(fd, VHOST_GET_FEATURES, &f));
		status(fd, 1 | 2);
		f = (1ULL << 32) | (1ULL << 33) | (1ULL << 15) | (1ULL << 29) | (1ULL << 5);
		CHECK(ioctl(fd, VHOST_SET_FEATURES, &f));
		status(fd, 1 | 2 | 8);
		iotlb(fd, VHOST_IOTLB_BATCH_BEGIN, 0, 0, 0);
		iotlb(fd, VHOST_IOTLB_UPDATE, 0, MEM, (uintptr_t)mem);
		iotlb(fd, VHOST_IOTLB_BATCH_END, 0, 0, 0);
		for (unsigned vq = 0; vq < 2; vq++) {
			uint64_t base = vq * 3 * 4096;
			struct vhost_vring_state num = { vq, 256 }, b = { vq, 0 }, en = { vq, 1 };
			struct vhost_vring_addr addr = { .index = vq, .desc_user_addr = base,
				.avail_user_addr = base + 4096, .used_user_addr = base + 8192 };
			struct vhost_vring_file k = { vq, kick[vq] }, c = { vq, call[vq] };
			CHECK(ioctl(fd, VHOST_SET_VRING_NUM, &num));
			CHECK(ioctl(fd, VHOST_SET_VRING_ADDR, &addr));
			CHECK(ioctl(fd, VHOST_SET_VRING_BASE, &b));
			CHECK(ioctl(fd, VHOST_SET_VRING_KICK, &k));
			CHECK(ioctl(fd, VHOST_SET_VRING_CALL, &c));
			CHECK(ioctl(fd, VHOST_VDPA_SET_VRING_ENABLE, &en));
		}
		status(fd, 1 | 2 | 8 | 4);
		status(fd, 0);
		close(fd);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / iters;
	printf("{\"ns_per_setup\": %.0f, \"iterations\": %d}\n", ns, iters);
	return 0;
}
