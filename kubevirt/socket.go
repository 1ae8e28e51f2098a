package kubevirt

// SocketDir is the directory virt-launcher scans for hook sockets
// (pkg/hooks HookSocketsSharedDirectory); each sidecar container sees
// its own subdirectory of it there.
const SocketDir = "/var/run/kubevirt-hooks"

// SocketName is the sidecar's one socket in SocketDir for the default
// binding (netctl): virt-launcher dials every file it finds there, so
// nothing else may be. A binding of another name gets the sidecar's
// SocketFor.
const SocketName = "netctl.sock"
