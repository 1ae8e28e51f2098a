package vdpa

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// MapMode says how a vDPA device's parent turns the IOTLB into DMA, which
// decides what memory VhostDevice.Map may take.
type MapMode int

const (
	// MapUnknown: sysfs did not show the parent. Map checks the memory as
	// for MapVA, which a PA parent would not need but never harms it.
	MapUnknown MapMode = iota
	// MapVA: the parent maps process virtual addresses (vhost-vdpa's
	// use_va: VDUSE, and vdpa_sim with use_va=1, its default). The
	// kernel maps only shared mappings of files and silently skips other
	// memory, so Map refuses anything else.
	MapVA
	// MapPA: the parent pins the pages and maps their physical addresses
	// (hardware: a PCI function or an auxiliary device such as an mlx5
	// sub-function). Any memory works, anonymous included.
	MapPA
)

func (m MapMode) String() string {
	switch m {
	case MapVA:
		return "va"
	case MapPA:
		return "pa"
	}
	return "unknown"
}

// mapModeOf decides by the vdpa device's parent: its bus or class
// ("vduse", "pci", "auxiliary"; "" for none) and its name. simUseVA is
// vdpa_sim's use_va parameter, for parents named vdpasim*.
func mapModeOf(parentSubsystem, parentName string, simUseVA bool) MapMode {
	switch {
	case parentSubsystem == "vduse":
		return MapVA
	case parentSubsystem == "pci", parentSubsystem == "auxiliary":
		return MapPA
	case strings.HasPrefix(parentName, "vdpasim"):
		if simUseVA {
			return MapVA
		}
		return MapPA
	}
	return MapUnknown
}

// MapModeOfFD is the MapMode of the vdpa device behind an open
// /dev/vhost-vdpa-N (its fd is only fstat'ed): for a caller that hands the
// fd on (netctl attach passes it to QEMU) without a VhostDevice. A fd
// that is not a vhost-vdpa node, or one sysfs does not show, is
// MapUnknown.
func MapModeOfFD(fd int) MapMode {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return MapUnknown
	}
	_, mode := mapModeOfNode(SysfsRoot, st.Rdev)
	return mode
}

// SysfsRoot is where sysfs is mounted.
const SysfsRoot = "/sys"

// mapModeOfNode finds the vdpa device behind the char device rdev
// (/sys/dev/char/MAJ:MIN is its vhost-vdpa-N, whose parent is the vdpa
// device, whose parent is the vdpa device's parent) and decides its
// MapMode. name is "" and the mode MapUnknown when sysfs does not show it.
func mapModeOfNode(sys string, rdev uint64) (name string, mode MapMode) {
	// One readlink instead of filepath.EvalSymlinks, which lstats every
	// component of the long /sys/devices path: under TCG that walk cost
	// as much as the whole vhost-vdpa bring-up. The link is relative
	// ("../../devices/.../vdpa0/vhost-vdpa-0") and nothing below
	// /sys/devices is a symlink, so resolving it by hand is the same.
	link := filepath.Join(sys, "dev/char", devString(rdev))
	target, err := os.Readlink(link)
	if err != nil {
		return "", MapUnknown
	}
	node := target
	if !filepath.IsAbs(node) {
		node = filepath.Join(filepath.Dir(link), target)
	}
	if !strings.HasPrefix(filepath.Base(node), "vhost-vdpa-") {
		return "", MapUnknown
	}
	vdev := filepath.Dir(node)
	if sub, err := os.Readlink(filepath.Join(vdev, "subsystem")); err != nil || filepath.Base(sub) != "vdpa" {
		return "", MapUnknown
	}
	parent := filepath.Dir(vdev)
	subsystem := ""
	if sub, err := os.Readlink(filepath.Join(parent, "subsystem")); err == nil {
		subsystem = filepath.Base(sub)
	}
	useVA := false
	if strings.HasPrefix(filepath.Base(parent), "vdpasim") { // the only parent whose mode is a module parameter
		b, _ := os.ReadFile(filepath.Join(sys, "module/vdpa_sim/parameters/use_va"))
		useVA = strings.TrimSpace(string(b)) != "N"
	}
	return filepath.Base(vdev), mapModeOf(subsystem, filepath.Base(parent), useVA)
}

// devString is "MAJ:MIN", as sysfs writes a device number.
func devString(rdev uint64) string {
	return uitoa(uint64(unix.Major(rdev))) + ":" + uitoa(uint64(unix.Minor(rdev)))
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
