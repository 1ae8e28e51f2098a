package diagnose

import (
	"slices"
	"strings"

	"github.com/netctl/netctl/policy"
	"github.com/netctl/netctl/virtio"
)

// followRequirements turns off, and explains by its first cause, every
// offered bit whose prerequisites (policy.Requirements, the virtio spec's
// table) are all off: GUEST_ECN acknowledged while GUEST_TSO4 and
// GUEST_TSO6 are off gets "needs GUEST_TSO4 or GUEST_TSO6, both off
// (property guest_tso4=off, guest_tso6=off)" instead of a generic reason,
// since QEMU and tun set TSO_ECN only together with TSO4 or TSO6, and a
// guest uses TSO only with checksum offload. A bit that was not offered
// keeps its own cause. Rows are changed in place; a prerequisite without
// a row gets one, since it is the cause.
func (e *explainer) followRequirements(rows map[uint]Row) {
	for changed, n := true, 0; changed && n <= len(policy.Requirements); n++ {
		changed = false
		for _, req := range policy.Requirements {
			b := req.F.Bits()[0]
			row, ok := rows[b]
			if !ok || !row.Offered || row.Layer == "dependency" {
				continue
			}
			var need []Row
			allOff := true
			for _, p := range req.AnyOf.Bits() {
				pr, ok := rows[p]
				if !ok {
					pr = e.otherRow(virtio.Bit(p))
					rows[p] = pr
				}
				if pr.Verdict != "off" {
					allOff = false
				}
				need = append(need, pr)
			}
			if !allOff {
				continue
			}
			row.Verdict, row.Layer, row.Reason = "off", "dependency", e.dependencyReason(need)
			rows[b] = row
			changed = true
		}
	}
}

// dependencyReason is "needs A, off (cause)" or "needs A or B, both off
// (causes)", following a chain to its first cause.
func (e *explainer) dependencyReason(need []Row) string {
	names := make([]string, len(need))
	causes := make([]string, len(need))
	for i, r := range need {
		names[i], causes[i] = r.Feature, e.shortCause(r)
	}
	why := "needs " + strings.Join(names, " or ") + ", off"
	switch len(need) {
	case 1:
	case 2:
		why = "needs " + strings.Join(names, " or ") + ", both off"
	default:
		why = "needs " + strings.Join(names, " or ") + ", all off"
	}
	return why + " (" + joinCauses(need, causes) + ")"
}

// Prefixes of the short causes that joinCauses merges.
const (
	causeProperty = "property "
	causeCmdline  = "set off on the command line: "
)

// shortCause is why a prerequisite row is off, short.
func (e *explainer) shortCause(r Row) string {
	p := propOf(virtio.Bit(r.Bit))
	switch {
	case r.Layer == "property" && p != "":
		return causeProperty + p + "=off"
	case r.Layer == "cmdline" && p != "":
		return causeCmdline + p + "=" + orElse(e.s.Cmdline[p], "off")
	case r.Layer == "dependency":
		return "it " + r.Reason
	case r.Offered && !r.Acked:
		return "the guest did not acknowledge it"
	}
	return r.Reason
}

// joinCauses names each prerequisite's cause: properties together
// ("property guest_tso4=off, guest_tso6=off"), one cause once when all
// share it, else "A: cause; B: cause".
func joinCauses(need []Row, causes []string) string {
	if len(causes) == 1 {
		return causes[0]
	}
	for _, prefix := range []string{causeProperty, causeCmdline} {
		same := true
		for _, c := range causes {
			same = same && strings.HasPrefix(c, prefix)
		}
		if same {
			var ps []string
			for _, c := range causes {
				ps = append(ps, strings.TrimPrefix(c, prefix))
			}
			return prefix + strings.Join(ps, ", ")
		}
	}
	if c := slices.Compact(slices.Clone(causes)); len(c) == 1 {
		if strings.HasPrefix(c[0], "it ") {
			return "both " + strings.Replace(strings.TrimPrefix(c[0], "it "), "needs ", "need ", 1)
		}
		return c[0]
	}
	var parts []string
	for i, r := range need {
		parts = append(parts, r.Feature+": "+strings.TrimPrefix(causes[i], "it "))
	}
	return strings.Join(parts, "; ")
}
