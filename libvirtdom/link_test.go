package libvirtdom_test

// The tests dial libvirt: link the RPC client (libvirtdom does not).
import _ "github.com/netctl/netctl/libvirtdom/rpc"
