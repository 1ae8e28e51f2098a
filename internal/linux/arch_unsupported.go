//go:build !linux || !(amd64 || arm64)

package linux

// netctl builds for Linux on amd64 and arm64 only: the ioctl encoding used
// here (dir<<30 | size<<16 | type<<8 | nr) is the asm-generic one those
// two share, and the mirrored structs were checked against their layouts.
// Other architectures (powerpc, mips, sparc) encode ioctls differently.
// Building anywhere else stops on the line below, on purpose.
var _ = netctl_builds_only_for_linux_amd64_and_arm64
