package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/netctl/netctl/internal/gendoc"
)

// gendocCommand writes the man pages and the shell completion from the
// command tree ("make docs"); hidden: it is for netctl's own build.
func gendocCommand() *cli.Command {
	return &cli.Command{
		Name:   "gendoc",
		Hidden: true,
		Usage:  "write the man pages (docs/man) and shell completion (completion/) under --dir",
		Flags:  []cli.Flag{&cli.StringFlag{Name: "dir", Value: ".", Usage: "the repository's root"}},
		Action: func(c *cli.Context) error {
			files, err := gendoc.Generate(newApp())
			if err != nil {
				return err
			}
			if err := files.Write(c.String("dir")); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "wrote %d files under %s\n", len(files), c.String("dir"))
			return nil
		},
	}
}
