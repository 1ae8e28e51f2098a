package guest

// agentScript is the Script the guest runs (busybox sh, as root, after the
// harness's init has loaded its modules and mounted the shares). It loads
// virtio_net (a module in Debian's kernels, not loaded at boot), says it
// is ready, then runs every command file the host drops into $A/cmd, one
// at a time in name order, writing the output and exit status back to
// $A/out. It polls every 50 ms and ends when $A/stop appears.
//
// The host writes a command as cmd/.N.tmp and renames it to cmd/N.sh, and
// the guest writes N.rc the same way, so neither side ever reads half a
// file. The share is mounted without a cache (9p cache=none), so each side
// sees the other's files at once.
const agentScript = `A=` + guestDir + `
netctl-modprobe virtio_net || { echo "guest agent: cannot load virtio_net"; exit 3; }
mkdir -p $A/cmd $A/out
cut -d' ' -f1 /proc/uptime > $A/ready.tmp && mv $A/ready.tmp $A/ready
echo "guest agent: ready after $(cat $A/ready)s of uptime"
while :; do
  for f in $A/cmd/*.sh; do
    [ -e "$f" ] || continue
    n=${f##*/}; n=${n%.sh}
    sh "$f" > $A/out/$n.out 2>&1 < /dev/null
    echo $? > $A/out/$n.rc.tmp && mv $A/out/$n.rc.tmp $A/out/$n.rc
    rm -f "$f"
  done
  [ -e $A/stop ] && { echo "guest agent: stop"; exit 0; }
  sleep 0.05
done`

// guestDir is where the agent's share is mounted in the guest.
const guestDir = "/agent"
