package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/finegrain-dev/finegrain/internal/version"
)

// newVersionCommand is `<program> version [-o text|json]`.
func newVersionCommand(program string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o text|json]",
		Short: "print the program's version, the Go version that built it and the platform",
		Long: "Prints " + program + "'s version (stamped at build time by make build and the images; " +
			"otherwise the module version or VCS revision the Go toolchain recorded, else \"dev\"), " +
			"the Go version that built it and the platform it runs on. The JSON form is a public " +
			"contract (docs/interfaces.md).",
		Args:                  NoArgs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get(program)
			switch output {
			case "text":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), info)
				return err
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			return Usagef("--output %q: want text or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
