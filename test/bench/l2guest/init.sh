#!/bin/busybox sh
# The nested guest's init for the benches' nested data paths
# (test/bench/attach, test/bench/vhostuser): load virtio-net, give each NIC
# its address by the last byte of its MAC (..:01 -> @ADDR01@, the NIC
# under test; ..:02 -> @ADDR02@, QEMU's own tap,vhost=on), and run l2agent,
# the TCP tool (test/bench/l2agent), on port 5201. l2guest.Init fills in
# the addresses each bench uses.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
while read -r m; do insmod /mods/$m.ko || echo "L2-ERR insmod $m"; done < /mods/order
ip link set lo up
# TCP buffers big enough for a stream that crosses two emulators.
echo "4096 131072 4194304" > /proc/sys/net/ipv4/tcp_rmem
echo "4096 131072 4194304" > /proc/sys/net/ipv4/tcp_wmem
/bin/l2agent &
known=" lo "
while true; do
  for d in /sys/class/net/*; do
    n=${d##*/}
    case "$known" in *" $n "*) continue;; esac
    [ -e "$d/device/features" ] || continue
    known="$known$n "
    mac=$(cat $d/address)
    case "$mac" in
      *:01) ip addr add @ADDR01@ dev "$n";;
      *:02) ip addr add @ADDR02@ dev "$n";;
    esac
    ip link set "$n" up
    echo "L2-NIC $n mac=$mac features=$(cat $d/device/features) uptime=$(cut -d' ' -f1 /proc/uptime)"
  done
  sleep 1
done
