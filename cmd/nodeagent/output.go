package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
)

// outputFormat is the value of a subcommand's -o flag: a human table or the JSON contract.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
)

func (f *outputFormat) String() string { return string(*f) }

func (f *outputFormat) Set(v string) error {
	switch outputFormat(v) {
	case outputTable, outputJSON:
		*f = outputFormat(v)
		return nil
	}
	return fmt.Errorf("%q is not an output format; want table or json", v)
}

// addOutputFlag registers -o on fs with the given default.
func addOutputFlag(fs *flag.FlagSet, f *outputFormat, def outputFormat) {
	*f = def
	fs.Var(f, "o", "output format: table or json")
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
