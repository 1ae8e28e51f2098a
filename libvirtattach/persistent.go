package libvirtattach

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// PersistentTapPrefix starts the name of the tap of a NIC attached with
// --persistent. The persistent definition names the tap (<target
// dev='...' managed='no'/>) and the hook makes it again at each start
// (the interface carries netctl's alias ua-netctl-ID, which the hook
// knows as hook.AttachAliasPrefix), so the
// name must stay free while the domain is off: the kernel's nctlN, which
// every other attach draws from, never has a letter after "nctl".
const PersistentTapPrefix = "nctlp"

// PersistentTapName is the tap name of NIC id of domain uuid attached
// with --persistent: PersistentTapPrefix and 8 hex digits of
// SHA-256(uuid/id), 13 bytes (the kernel allows 15).
func PersistentTapName(uuid, id string) string {
	h := sha256.Sum256([]byte(strings.ToLower(uuid) + "/" + id))
	return PersistentTapPrefix + hex.EncodeToString(h[:4])
}
