#!/bin/busybox sh
# L2 guest init (test/l2): load the virtio-net driver (/mods/order), then report every NIC
# once, with the guest driver's own feature word, as
#   L2-NIC <eth> mac=<mac> driver=<driver> features=<device/features>
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
up() { cut -d' ' -f1 /proc/uptime; }
echo "L2-INIT uptime=$(up)"
while read -r m; do insmod /mods/$m.ko || echo "L2-ERR insmod $m"; done < /mods/order
ip link set lo up
known=" lo "
while true; do
  for d in /sys/class/net/*; do
    n=${d##*/}
    case "$known" in *" $n "*) continue;; esac
    [ -e "$d/device/features" ] || continue
    known="$known$n "
    ip link set "$n" up
    echo "L2-NIC $n mac=$(cat $d/address) driver=$(basename "$(readlink $d/device/driver)") features=$(cat $d/device/features) uptime=$(up)"
  done
  sleep 1
done
