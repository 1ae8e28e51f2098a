#!/bin/busybox sh
# L2 guest init (test/l2): load the virtio-net driver (/mods/order), then report every NIC
# once (by name and MAC: a NIC hotplugged after another was unplugged takes its name), with the
# guest driver's own feature word, as
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
# l2.rebind=MAC (l2.Config.RebindOn): when that NIC's carrier goes down, unbind every other
# virtio-net device from virtio_net and bind it again, bring it up, print L2-REBOUND n; once
# the carrier is back, print L2-REARMED n (the next carrier loss is the next trigger).
trig=$(sed -n 's/.*l2\.rebind=\([^ ]*\).*/\1/p' /proc/cmdline)
rebound=0
tdown=0
# l2.ip=MAC@ADDR/PREFIX (l2.Config.IP): the NIC with that MAC gets the address when it appears.
ipmac=$(sed -n 's/.*l2\.ip=\([^@ ]*\)@.*/\1/p' /proc/cmdline)
ipaddr=$(sed -n 's/.*l2\.ip=[^@ ]*@\([^ ]*\).*/\1/p' /proc/cmdline)
rebind() {
  drv=/sys/bus/virtio/drivers/virtio_net
  k=0
  for v in $drv/virtio*; do
    [ "$(readlink -f "$v")" = "$(readlink -f "$1/device")" ] && continue
    if ! echo "${v##*/}" > $drv/unbind; then echo "L2-ERR unbind ${v##*/}"; continue; fi
    if echo "${v##*/}" > $drv/bind; then k=$((k+1)); else echo "L2-ERR bind ${v##*/}"; fi
  done
  for n in /sys/class/net/*; do ip link set "${n##*/}" up; done
  rebound=$((rebound+1))
  # devices=k: how many were unbound and bound again (the test wants each one it reads).
  echo "L2-REBOUND $rebound devices=$k uptime=$(up)"
}
while true; do
  if [ -n "$trig" ]; then
    for d in /sys/class/net/*; do
      [ "$(cat "$d/address")" = "$trig" ] || continue
      c=$(cat "$d/carrier" 2>/dev/null)
      if [ "$c" = 0 ] && [ $tdown = 0 ]; then tdown=1; rebind "$d"; fi
      if [ "$c" = 1 ] && [ $tdown = 1 ]; then tdown=0; echo "L2-REARMED $rebound uptime=$(up)"; fi
    done
  fi
  for d in /sys/class/net/*; do
    n=${d##*/}
    k="$n@$(cat "$d/address" 2>/dev/null)"
    case "$known" in *" $k "*|*" $n "*) continue;; esac
    [ -e "$d/device/features" ] || continue
    known="$known$k "
    ip link set "$n" up
    [ -n "$ipmac" ] && [ "$(cat $d/address)" = "$ipmac" ] && ip addr add "$ipaddr" dev "$n"
    echo "L2-NIC $n mac=$(cat $d/address) driver=$(basename "$(readlink $d/device/driver)") features=$(cat $d/device/features) uptime=$(up)"
  done
  sleep 1
done
