#!/bin/busybox sh
# netctl VM guest init (test/vm). Loads the modules listed in /mods/order,
# mounts the host's / read-only at /host and the run's results share at
# /results, runs /results/cmd with its output on the virtio-serial port
# "netctl.out", writes the exit code to /results/rc and hands it to QEMU
# through isa-debug-exit (QEMU exits with (rc<<1)|1).
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TERM=linux
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm /tmp /run /root /host /results /var/run
mount -t devpts devpts /dev/pts
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mount -t tmpfs shm /dev/shm
failed=
while read -r m; do
  insmod "/mods/$m.ko" 2>/tmp/insmod.err || { failed="$failed $m"; echo "netctl-vm: insmod $m: $(cat /tmp/insmod.err)"; }
done < /mods/order
for t in /sys/bus/virtio/drivers/9pnet_virtio/virtio*/mount_tag; do
  [ -f "$t" ] || continue
  tag=$(tr -d '\0' < "$t")
  case $tag in
    hostroot) mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /host || echo "netctl-vm: mount hostroot failed";;
    results)  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results /results || echo "netctl-vm: mount results failed";;
  esac
done
ip link set lo up 2>/dev/null
OUT=/dev/console
for p in /sys/class/virtio-ports/*; do
  [ "$(cat "$p/name" 2>/dev/null)" = netctl.out ] && OUT=/dev/$(basename "$p")
done
# A heartbeat on the port "netctl.beat": the guest's uptime every 5 s. The
# host takes a VM whose beat stops for RunOptions.FreezeAfter as frozen.
for p in /sys/class/virtio-ports/*; do
  if [ "$(cat "$p/name" 2>/dev/null)" = netctl.beat ]; then
    (while :; do cut -d' ' -f1 /proc/uptime; sleep 5; done) > "/dev/$(basename "$p")" 2>/dev/null &
  fi
done
[ -n "$failed" ] && echo "$failed" > /results/insmod-failed
# RunOptions.Preload: on-demand modules loaded before the ready line, so that a
# kernel that dies patching its text for them (TCG, 2 vCPUs) counts as a boot panic.
if [ -f /results/preload ]; then
  for m in $(cat /results/preload); do netctl-modprobe "$m" || echo "netctl-vm: preload $m failed"; done
fi
echo "netctl-vm: ready after $(cut -d' ' -f1 /proc/uptime)s"
rc=120
if [ -f /results/cmd ]; then
  cd /tmp
  sh /results/cmd > "$OUT" 2>&1 < /dev/null
  rc=$?
else
  echo "netctl-vm: no /results/cmd: the results share did not mount"
fi
echo "$rc" > /results/rc.tmp && mv /results/rc.tmp /results/rc
sync
echo "netctl-vm: exit $rc after $(cut -d' ' -f1 /proc/uptime)s"
code=$rc; [ "$code" -gt 127 ] && code=127
printf "\\$(printf '%03o' "$code")" | dd of=/dev/port bs=1 seek=244 count=1 conv=notrunc 2>/dev/null
poweroff -f
