/* The minimal attach that `netctl attach` is compared with (make bench):
 * the same tap and vhost-net fds handed to QEMU with the same QMP sequence
 * as netctl's (getfd per fd with SCM_RIGHTS, netdev_add, device_add) over a
 * raw unix socket, and nothing else: no probe, no checks of QEMU or the
 * host, no state file, no undo. C rather than Python: python3 is not on a
 * fresh Debian 12 machine (priority optional), gcc is what make bench
 * already installs, and a static C binary runs in the test VM, which has
 * no C library; it also starts in well under a millisecond, so the
 * comparison charges netctl with all of its own cost.
 *
 * usage: attach-c QMP_SOCKET TAP ID MAC BUS|- userspace|vhost-net
 * The tap must exist (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, one queue).
 * Exit 0 when device_add answered "return", 1 otherwise.
 */
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int qmp;
static char buf[65536];
static size_t have;

static void die(const char *what) {
	perror(what);
	exit(1);
}

/* line reads the next QMP line into buf (NUL-terminated, CR LF cut) and
 * returns its length. */
static size_t line(void) {
	char *nl;
	while ((nl = memchr(buf, '\n', have)) == NULL) {
		if (have == sizeof buf - 1) {
			fprintf(stderr, "attach-c: QMP line too long\n");
			exit(1);
		}
		ssize_t n = read(qmp, buf + have, sizeof buf - 1 - have);
		if (n <= 0)
			die("attach-c: read QMP");
		have += n;
	}
	return nl - buf + 1;
}

/* consume drops the line of length len from buf. */
static void consume(size_t len) {
	memmove(buf, buf + len, have - len);
	have -= len;
}

/* reply skips events ({"timestamp": ..., "event": ...}) until the answer:
 * 0 for {"return": ...}, -1 for {"error": ...}. */
static int reply(void) {
	for (;;) {
		size_t len = line();
		int ok = strncmp(buf, "{\"return\"", 9) == 0, bad = strncmp(buf, "{\"error\"", 8) == 0;
		if (bad)
			fprintf(stderr, "attach-c: %.*s", (int)len, buf);
		consume(len);
		if (ok || bad)
			return ok ? 0 : -1;
	}
}

/* cmd sends one command, with fd as SCM_RIGHTS when fd >= 0. */
static void cmd(const char *json, int fd) {
	struct iovec iov = {(void *)json, strlen(json)};
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		m.msg_control = u.b;
		m.msg_controllen = sizeof u.b;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	if (sendmsg(qmp, &m, 0) != (ssize_t)iov.iov_len)
		die("attach-c: send QMP");
	if (reply() != 0) {
		fprintf(stderr, "attach-c: failed: %s\n", json);
		exit(1);
	}
}

int main(int argc, char **argv) {
	if (argc != 7) {
		fprintf(stderr, "usage: attach-c QMP_SOCKET TAP ID MAC BUS|- userspace|vhost-net\n");
		return 2;
	}
	const char *sock = argv[1], *tap = argv[2], *id = argv[3], *mac = argv[4], *bus = argv[5];
	int vhost = strcmp(argv[6], "vhost-net") == 0;

	int tfd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (tfd < 0)
		die("attach-c: /dev/net/tun");
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", tap);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	if (ioctl(tfd, TUNSETIFF, &ifr) < 0)
		die("attach-c: TUNSETIFF");
	int vfd = -1;
	if (vhost && (vfd = open("/dev/vhost-net", O_RDWR | O_CLOEXEC)) < 0)
		die("attach-c: /dev/vhost-net");

	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	if ((qmp = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(qmp, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("attach-c: connect QMP");
	size_t len = line();
	if (strncmp(buf, "{\"QMP\"", 6) != 0) {
		fprintf(stderr, "attach-c: no QMP greeting: %.*s", (int)len, buf);
		return 1;
	}
	consume(len);
	cmd("{\"execute\":\"qmp_capabilities\"}", -1);

	char j[1024];
	snprintf(j, sizeof j, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"%s-tap0\"}}", id);
	cmd(j, tfd);
	if (vhost) {
		snprintf(j, sizeof j, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"%s-vhost0\"}}", id);
		cmd(j, vfd);
		snprintf(j, sizeof j,
			 "{\"execute\":\"netdev_add\",\"arguments\":{\"type\":\"tap\",\"id\":\"nd-%s\",\"fds\":\"%s-tap0\","
			 "\"vhost\":true,\"vhostforce\":true,\"vhostfds\":\"%s-vhost0\"}}",
			 id, id, id);
	} else {
		snprintf(j, sizeof j,
			 "{\"execute\":\"netdev_add\",\"arguments\":{\"type\":\"tap\",\"id\":\"nd-%s\",\"fds\":\"%s-tap0\",\"vhost\":false}}",
			 id, id);
	}
	cmd(j, -1);
	if (strcmp(bus, "-") == 0)
		snprintf(j, sizeof j,
			 "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"virtio-net-pci\",\"id\":\"%s\",\"netdev\":\"nd-%s\",\"mac\":\"%s\"}}",
			 id, id, mac);
	else
		snprintf(j, sizeof j,
			 "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"virtio-net-pci\",\"id\":\"%s\",\"netdev\":\"nd-%s\",\"mac\":\"%s\",\"bus\":\"%s\"}}",
			 id, id, mac, bus);
	cmd(j, -1);
	return 0;
}
