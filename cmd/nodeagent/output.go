package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// outputFormat is the value of a subcommand's -o/--output flag: a human table or the JSON contract.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
)

func (f *outputFormat) String() string { return string(*f) }

// Type names the value in the usage text.
func (f *outputFormat) Type() string { return "format" }

func (f *outputFormat) Set(v string) error {
	switch outputFormat(v) {
	case outputTable, outputJSON:
		*f = outputFormat(v)
		return nil
	}
	return fmt.Errorf("%q is not an output format; want table or json", v)
}

// addOutputFlag registers -o/--output on fs with the given default.
func addOutputFlag(fs *pflag.FlagSet, f *outputFormat, def outputFormat) {
	*f = def
	fs.VarP(f, "output", "o", "output format: table or json")
}

// writeOutput writes value as indented JSON, or lets table render the human form.
func writeOutput(w io.Writer, f outputFormat, value any, table func(io.Writer) error) error {
	if f == outputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(value)
	}
	return table(w)
}
