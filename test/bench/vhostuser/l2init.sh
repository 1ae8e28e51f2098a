#!/bin/busybox sh
# The nested guest's init for vhostuser-bench's nested data path
# (test/bench/vhostuser): load virtio-net, give each NIC its address by the
# last byte of its MAC (..:01 -> 10.93.0.2/24, the NIC on vhost-user to the
# bridge; ..:02 -> 10.94.0.2/24, QEMU's own tap,vhost=on), and run l2agent,
# the TCP tool (test/bench/l2agent), on port 5201. As attach-bench's
# l2init.sh, with its own subnets.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
while read -r m; do insmod /mods/$m.ko || echo "L2-ERR insmod $m"; done < /mods/order
ip link set lo up
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
      *:01) ip addr add 10.93.0.2/24 dev "$n";;
      *:02) ip addr add 10.94.0.2/24 dev "$n";;
    esac
    ip link set "$n" up
    echo "L2-NIC $n mac=$mac features=$(cat $d/device/features) uptime=$(cut -d' ' -f1 /proc/uptime)"
  done
  sleep 1
done
