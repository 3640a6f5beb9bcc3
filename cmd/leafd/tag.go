package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store"
)

// storeTimeout bounds a command's work with the database, migrations
// included.
const storeTimeout = time.Minute

// newTagCommand returns `leafd tag` and its subcommands. They use the
// configured store directly, so they work with no server running.
func newTagCommand(configPath *string, stdout, stderr io.Writer) *cobra.Command {
	tag := &cobra.Command{
		Use:   "tag",
		Short: "Create, list and resize segment tags in the configured store",
		Args:  cobra.NoArgs,
	}
	var (
		step, maxID int64
		description string
	)
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a tag (max_id 1 and step 1000 unless given)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd.Context(), *configPath, stderr, true, func(ctx context.Context, db store.Store, maxStep int64) error {
				t := leafd.Tag{Name: args[0], Step: step, MaxID: maxID, Description: description}
				if err := checkNewTag(t, maxStep); err != nil {
					return usageError{errors.New(leafd.ErrorMessage(err))}
				}
				created, err := db.CreateTag(ctx, t)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "created tag %s: max_id %d, step %d\n", created.Name, created.MaxID, created.Step)
				return nil
			})
		},
	}
	add.Flags().Int64Var(&step, "step", 1000, "the table step: the smallest range a server takes")
	add.Flags().Int64Var(&maxID, "max-id", 1, "the first ID to hand out")
	add.Flags().StringVar(&description, "description", "", "what the IDs are for")

	list := &cobra.Command{
		Use:   "list",
		Short: "List every tag with its max_id, step and description",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A list needs no DDL: it never migrates, so that a user
			// without CREATE privileges can run it. A store not migrated
			// yet has no tags.
			return withStore(cmd.Context(), *configPath, stderr, false, func(ctx context.Context, db store.Store, _ int64) error {
				tags, err := db.ListTags(ctx)
				if store.MissingTable(err) {
					fmt.Fprintln(stdout, "(no tags: the store has no leaf_alloc table yet; leafd migrate creates it, and leafd tag add NAME too when store.migrate is on)")
					return nil
				}
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TAG\tMAX_ID\tSTEP\tUPDATED (UTC)\tDESCRIPTION")
				for _, t := range tags {
					fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", t.Name, t.MaxID, t.Step, t.UpdateTime.UTC().Format(time.DateTime), t.Description)
				}
				if err := w.Flush(); err != nil {
					return err
				}
				if len(tags) == 0 {
					fmt.Fprintln(stdout, "(no tags: create one with leafd tag add NAME)")
				}
				return nil
			})
		},
	}

	setStep := &cobra.Command{
		Use:   "set-step NAME STEP",
		Short: "Change a tag's table step; servers use it from their next range load",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd.Context(), *configPath, stderr, true, func(ctx context.Context, db store.Store, maxStep int64) error {
				if err := leafd.ValidateTag(args[0]); err != nil {
					return usageError{errors.New(leafd.ErrorMessage(err))}
				}
				n, err := strconv.ParseInt(args[1], 10, 64)
				if err != nil {
					return usageError{fmt.Errorf("step %q is not a whole number", args[1])}
				}
				if err := leafd.ValidateStep(n, maxStep); err != nil {
					return usageError{errors.New(leafd.ErrorMessage(err))}
				}
				old, updated, err := db.UpdateTag(ctx, args[0], leafd.TagUpdate{Step: &n})
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "tag %s: step %d -> %d (each server uses it from its next range load)\n", updated.Name, old.Step, updated.Step)
				return nil
			})
		},
	}
	tag.AddCommand(add, list, setStep)
	return tag
}

// checkNewTag validates a tag to create as POST /api/tags does.
func checkNewTag(t leafd.Tag, maxStep int64) error {
	if err := leafd.ValidateTag(t.Name); err != nil {
		return err
	}
	if err := leafd.ValidateStep(t.Step, maxStep); err != nil {
		return err
	}
	if t.MaxID < 1 || t.MaxID > leafd.MaxID-t.Step {
		return leafd.Errorf(leafd.EInvalidBody, "max-id %d is out of range: use 1 to %d", t.MaxID, leafd.MaxID-t.Step)
	}
	return leafd.ValidateDescription(t.Description)
}

// withStore opens the configured store, migrates it when migrate is asked
// for and store.migrate is on, and runs f with segment.max_step as the
// largest step allowed. A store error keeps its message: "tag exists", "not
// defined", "nothing accepts connections there".
func withStore(ctx context.Context, configPath string, stderr io.Writer, migrate bool, f func(context.Context, store.Store, int64) error) error {
	cfg, db, err := openConfigured(configPath, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if migrate && cfg.Store.Migrate {
		if err := db.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", commandError(err))
		}
	}
	return commandError(f(ctx, db, cfg.Segment.MaxStep))
}

// commandError words a store error for the command line: the client
// message of a coded error ("already exists", "not defined"), and for a
// database that could not be used, the store's message (the cause and what
// to do) with the driver's own error after it.
func commandError(err error) error {
	var ue usageError
	var le *leafd.Error
	switch {
	case err == nil, errors.As(err, &ue), !errors.As(err, &le):
		return err
	case le.Code == leafd.EStoreUnavailable && le.Err != nil:
		return fmt.Errorf("%s (%v)", le.Message, le.Err)
	}
	return errors.New(le.Message)
}

// version prints the module version and VCS revision the binary was built
// from, and the Go version.
func version(stdout io.Writer) {
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					rev += "+modified"
				}
			}
		}
	}
	if rev != "" {
		v += " " + rev
	}
	fmt.Fprintf(stdout, "leafd %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
