// Command leafd is the leafd ID server.
//
//	leafd [serve] [--config FILE]   serve IDs over HTTP (the default)
//	leafd migrate [--config FILE]   apply the database migrations and exit
//	leafd decode ID [--config FILE] decode a snowflake ID as JSON
//	leafd compose TIME              the first snowflake IDs of a millisecond, as JSON
//	leafd tag add NAME [--step N] [--max-id N] [--description S]
//	        [--format opaque [--digits D]]
//	        [--format dated --period day|month|year [--zone Z] [--digits D] [--max-step N]]
//	leafd tag list                  list the tags of the configured store
//	leafd tag set-step NAME N       change a tag's table step
//	leafd version                   print the version
//
// Configuration comes from config.yaml (or --config FILE) and LEAFD_*
// environment variables; see the README and docs/contract.md section 7.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	// The time zones of dated tags, so that a container without
	// /usr/share/zoneinfo serves them too.
	_ "time/tzdata"

	"github.com/spf13/cobra"
)

// Exit codes of every command (docs/contract.md section 7).
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// usageError marks an error as the caller's: a bad flag, argument or
// configuration value. It exits with code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "leafd:", err)
	if _, ok := errors.AsType[usageError](err); ok {
		return exitUsage
	}
	return exitRuntime
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	var configPath string
	serveIDs := func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), configPath, stderr) }
	root := &cobra.Command{
		Use:   "leafd",
		Short: "leafd hands out unique 64-bit IDs over HTTP (Leaf segment and snowflake modes)",
		Long: "leafd hands out unique 64-bit IDs over HTTP: Meituan Leaf's segment mode and\n" +
			"snowflake mode over MySQL, PostgreSQL or an embedded SQLite file. With no command it serves.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          serveIDs,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&configPath, "config", "", "configuration file (default ./config.yaml when present)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	root.AddCommand(&cobra.Command{
		Use:   "serve",
		Short: "Serve IDs over HTTP (the default command)",
		Args:  cobra.NoArgs,
		RunE:  serveIDs,
	}, &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return migrate(cmd.Context(), configPath, stdout, stderr)
		},
	}, newTagCommand(&configPath, stdout, stderr), newTokenCommand(&configPath, stdout, stderr), newShardsCommand(&configPath, stdout, stderr), newDecodeOpaqueCommand(&configPath, stdout, stderr), newComposeCommand(&configPath, stdout, stderr), &cobra.Command{
		Use:   "version",
		Short: "Print the version of leafd",
		Args:  cobra.NoArgs,
		Run:   func(*cobra.Command, []string) { version(stdout) },
	}, &cobra.Command{
		Use:   "decode ID",
		Short: "Decode a snowflake ID with the configured layout, as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return decode(configPath, args[0], stdout, stderr)
		},
	})
	// Wrong arguments are usage errors too.
	var wrapArgs func(*cobra.Command)
	wrapArgs = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError{err}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			wrapArgs(sub)
		}
	}
	wrapArgs(root)
	return root
}
