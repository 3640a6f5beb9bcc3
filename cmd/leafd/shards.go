package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/leafd/leafd/store/sharded"
)

// newShardsCommand returns `leafd shards` and its subcommands, for a
// configuration with store.shards.
func newShardsCommand(configPath *string, stdout, stderr io.Writer) *cobra.Command {
	shards := &cobra.Command{
		Use:   "shards",
		Short: "Show and move the slots of store.shards",
		Args:  cobra.NoArgs,
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show every database of store.shards: its health, its record and its slots",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withShards(cmd.Context(), *configPath, stderr, func(ctx context.Context, s *sharded.Store) error {
				return printShards(stdout, s.Slots(), s.Status(ctx))
			})
		},
	}
	move := &cobra.Command{
		Use:   "move SLOT DATABASE",
		Short: "Move a slot to the database at that place in store.shards (0 is the first); safe to run again if interrupted",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			slot, err1 := strconv.ParseInt(args[0], 10, 64)
			to, err2 := strconv.Atoi(args[1])
			if err1 != nil || err2 != nil {
				return usageError{fmt.Errorf("leafd shards move SLOT DATABASE: both are whole numbers, such as leafd shards move 3 2")}
			}
			return withShards(cmd.Context(), *configPath, stderr, func(ctx context.Context, s *sharded.Store) error {
				if err := s.MoveSlot(ctx, slot, to, nil); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "slot %d is in store.shards[%d]\n", slot, to)
				return nil
			})
		},
	}
	shards.AddCommand(status, move)
	return shards
}

// withShards opens the configured sharded store and runs f; a
// configuration without store.shards is a usage error.
func withShards(ctx context.Context, configPath string, stderr io.Writer, f func(context.Context, *sharded.Store) error) error {
	_, db, err := openConfigured(configPath, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	s, ok := db.(*sharded.Store)
	if !ok {
		return usageError{errors.New("store.shards is not set: these commands are for a store over several databases")}
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	return commandError(f(ctx, s))
}

// printShards writes one line per database.
func printShards(w io.Writer, slots int64, st []sharded.ShardStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "DATABASE\tADDRESS\tHEALTH\tSLOTS ACTIVE\tLEAVING\n")
	placed := 0
	for _, s := range st {
		health := "ok"
		switch {
		case s.Err != nil:
			health = "unreachable: " + strings.SplitN(s.Err.Error(), ";", 2)[0]
		case s.Deployment == "":
			health = "not initialised (run leafd migrate)"
		case !s.Initialised:
			health = "initialising (run leafd migrate)"
		}
		placed += len(s.Active)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", s.Index, s.Address, health, ints(s.Active), ints(s.Leaving))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d of %d slots active in a database that answered\n", placed, slots)
	return err
}

func ints(v []int64) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, ",")
}
