package libvirtd_test

// The tests dial libvirt in this process too: link the RPC client (libvirtdom
// does not; cmd/netctl's full build does).
import _ "github.com/netctl/netctl/libvirtdom/rpc"
