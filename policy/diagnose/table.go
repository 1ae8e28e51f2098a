package diagnose

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report for a person: a header, one line per
// feature bit, and the offloads that are off.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "NIC %s", r.NIC)
	if r.QEMU != "" {
		fmt.Fprintf(w, " (QEMU %s)", r.QEMU)
	}
	if r.Kernel != "" {
		fmt.Fprintf(w, " on Linux %s", r.Kernel)
	}
	fmt.Fprintf(w, "\nbackend: %s\n", r.Backend)
	fmt.Fprintf(w, "status:  %s\n", orDash(strings.Join(r.Status, " ")))
	if r.Header != "" {
		fmt.Fprintf(w, "header:  %s\n", r.Header)
	}
	fmt.Fprintf(w, "offered: %s\nacked:   %s\n\n", r.Host.Hex, r.Guest.Hex)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FEATURE\tBIT\tOFFERED\tACKED\tBACKEND\tLOWER\tVERDICT\tREASON")
	for _, row := range r.Features {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Feature, row.Bit, yesNo(row.Offered), yesNo(row.Acked),
			row.Backend, row.Lower, row.Verdict, row.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Off) > 0 {
		fmt.Fprintf(w, "\noffloads off:\n")
		for _, l := range r.Off {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
