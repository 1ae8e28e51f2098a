#!/bin/bash
# Installs what netctl's VM test layer needs on a Debian 12 machine, from
# Debian's own archive, and nothing that is already there:
#   qemu-system-x86  boots the test kernels (TCG, or KVM where QEMU can use it)
#   xz-utils         decompresses trixie's kernel modules (.ko.xz)
#   cpio             only to cross-check the initramfs writer in a unit test
#   iproute2         ip, used by tests and the demo
#   gcc, libc6-dev   the C side of make bench's setup comparison (static binary)
#   prometheus       prometheus and promtool (2.42) for the exporter's host tests:
#                    promtool check metrics, and a real server that scrapes it;
#                    installed with no daemon started, like libvirt (below)
#   libvirt-daemon-system, libvirt-clients  a real libvirtd (libvirtd, virtlogd,
#                    virsh, the libvirt-qemu user QEMU runs as) for the libvirt
#                    hook's end-to-end host test (test/libvirtd); installed with
#                    no daemon started (policy-rc.d says 101 while apt runs)
#   zsh              runs the generated zsh completion in a unit test
#   man-db           man -w, for the package's host test (internal/mkdeb:
#                    the installed man pages are found)
#   protobuf-compiler protoc, for the unit test that regenerates the KubeVirt
#                    hook sidecar's Go code and diffs it (make proto)
# The kernels and busybox themselves are fetched into .cache/vm by
# "netctl-vm prepare" (apt-get download; the machine's sources stay as they are).
set -euo pipefail
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v xz >/dev/null || need+=(xz-utils)
command -v cpio >/dev/null || need+=(cpio)
command -v ip >/dev/null || need+=(iproute2)
command -v gcc >/dev/null || need+=(gcc)
[ -f /usr/include/linux/vhost.h ] && [ -f /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev linux-libc-dev)
command -v libvirtd >/dev/null && command -v virtlogd >/dev/null && command -v virsh >/dev/null &&
  getent passwd libvirt-qemu >/dev/null || need+=(libvirt-daemon-system libvirt-clients)
command -v man >/dev/null || need+=(man-db)
command -v zsh >/dev/null || need+=(zsh)
command -v protoc >/dev/null || need+=(protobuf-compiler)
command -v prometheus >/dev/null && command -v promtool >/dev/null || need+=(prometheus)
command -v dpkg-deb >/dev/null || { echo "host-deps: dpkg-deb missing: this is not a Debian machine" >&2; exit 1; }
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "host-deps: need root to install ${need[*]} (apt-get install)" >&2
  exit 1
fi
echo "host-deps: installing ${need[*]}"
# No service may start from a postinst (libvirtd, virtlogd): where the machine
# has no policy-rc.d, one that denies every start stands in while apt runs.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
