package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/snowflake"
)

func newComposeCommand(configPath *string, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "compose TIME",
		Short: "Print the first snowflake ID of a millisecond and of the next, with the configured layout, as JSON",
		Long: "Print the JSON of GET /snowflake/at/{time}, offline, with the configured layout: the\n" +
			"smallest ID of the millisecond TIME (\"first\") and of the millisecond after it (\"next\"),\n" +
			"so that [first, next) holds every ID of that millisecond. TIME is RFC 3339 with a zone\n" +
			"(2026-11-23T00:50:53.738Z, 2026-11-23T01:50:53+01:00) or Unix milliseconds.",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return compose(*configPath, args[0], stdout, stderr)
		},
	}
}

// compose prints the JSON of GET /snowflake/at/{time} for raw.
func compose(configPath, raw string, stdout, stderr io.Writer) error {
	cfg, _, err := setup(configPath, stderr)
	if err != nil {
		return err
	}
	out, err := snowflake.ComposeJSON(layoutOf(cfg.Snowflake), raw)
	if err != nil {
		return usageError{errors.New(leafd.ErrorMessage(err))}
	}
	return printJSON(stdout, out)
}

// printJSON writes v as JSON on a line of its own.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
