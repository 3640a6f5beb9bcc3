package main

import (
	"cmp"
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
	"github.com/leafd/leafd/internal/config"
	"github.com/leafd/leafd/segment"
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
		Short: "Create, list, resize and repair segment tags in the configured store",
		Args:  cobra.NoArgs,
	}
	var (
		step, maxID int64
		description string
		ff          formatFlags
	)
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a tag (max_id 1 and step 1000 unless given)",
		Example: "  leafd tag add order --step 500 --description \"order IDs\"\n" +
			"  leafd tag add user --format opaque --digits 9\n" +
			"  leafd tag add orders --format dated --period day --zone Asia/Shanghai --digits 6",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd.Context(), *configPath, stderr, true, func(ctx context.Context, db store.Store, cfg *config.Config) error {
				t := leafd.Tag{Name: args[0], Step: step, MaxID: maxID, Description: description}
				if err := checkNewTag(t, cfg.Segment.MaxStep); err != nil {
					return usageError{errors.New(leafd.ErrorMessage(err))}
				}
				ff.given = cmd.Flags().Changed
				if err := ff.apply(&t, cfg.Segment.MaxStep, opaqueKey(cfg)); err != nil {
					return err
				}
				created, err := db.CreateTag(ctx, t)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "created tag %s: max_id %d, step %d", created.Name, created.MaxID, created.Step)
				switch created.Format {
				case segment.FormatOpaque:
					fmt.Fprintf(stdout, ", opaque (IDs up to %d)", segment.OpaqueDomain(created.Digits))
				case segment.FormatDated:
					fmt.Fprintf(stdout, ", %s", formatOf(created))
				}
				fmt.Fprintln(stdout)
				return nil
			})
		},
	}
	add.Flags().Int64Var(&step, "step", 1000, "the table step: the smallest range a server takes")
	add.Flags().Int64Var(&maxID, "max-id", 1, "the first ID to hand out")
	add.Flags().StringVar(&description, "description", "", "what the IDs are for")
	add.Flags().StringVar(&ff.format, "format", segment.FormatSequential,
		"sequential; opaque: IDs that reveal no volume (needs segment.opaque_key); or dated: the date of the period followed by a counter")
	add.Flags().IntVar(&ff.digits, "digits", 0, "an opaque tag's IDs as numbers of at most this many decimal digits (6 to 18; default: below 2^53);\n"+
		"a dated tag's counter width (default 6; at most 10 for a day, 12 for a month, 14 for a year)")
	add.Flags().StringVar(&ff.period, "period", "", "a dated tag's period: day (IDs start yyyyMMdd), month (yyyyMM) or year (yyyy)")
	add.Flags().StringVar(&ff.zone, "zone", "", "the time zone of a dated tag's dates, an IANA name such as Asia/Shanghai (default UTC)")
	add.Flags().Int64Var(&ff.maxStep, "max-step", 0, "caps the step servers choose for a dated tag, 1 to segment.max_step\n"+
		"(default segment.max_step; 1 loads one number at a time: no gaps, one transaction per ID)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List every tag with its max_id, step, format and description",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A list needs no DDL: it never migrates, so that a user
			// without CREATE privileges can run it. A store not migrated
			// yet has no tags.
			return withStore(cmd.Context(), *configPath, stderr, false, func(ctx context.Context, db store.Store, _ *config.Config) error {
				tags, err := db.ListTags(ctx)
				rows := make([]string, len(tags))
				for i, t := range tags {
					rows[i] = fmt.Sprintf("%s\t%d\t%d\t%s\t%s\t%s", t.Name, t.MaxID, t.Step, formatOf(t),
						t.UpdateTime.UTC().Format(time.DateTime), t.Description)
				}
				return printTable(stdout, err, "TAG\tMAX_ID\tSTEP\tFORMAT\tUPDATED (UTC)\tDESCRIPTION", rows,
					"(no tags: the store has no leaf_alloc table yet; leafd migrate creates it, and leafd tag add NAME too when store.migrate is on)",
					"(no tags: create one with leafd tag add NAME)")
			})
		},
	}

	setStep := &cobra.Command{
		Use:   "set-step NAME STEP",
		Short: "Change a tag's table step; servers use it from their next range load",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd.Context(), *configPath, stderr, true, func(ctx context.Context, db store.Store, cfg *config.Config) error {
				if err := leafd.ValidateTag(args[0]); err != nil {
					return usageError{errors.New(leafd.ErrorMessage(err))}
				}
				n, err := strconv.ParseInt(args[1], 10, 64)
				if err != nil {
					return usageError{fmt.Errorf("step %q is not a whole number", args[1])}
				}
				if err := leafd.ValidateStep(n, cfg.Segment.MaxStep); err != nil {
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
	repair := &cobra.Command{
		Use:   "repair NAME",
		Short: "Raise a rewound tag's max_id to its high-water mark, so that it serves again above every ID issued",
		Long: "Raise a rewound tag's max_id to its high-water mark, the end of the highest range ever handed out for it,\n" +
			"so that it serves again above every ID issued. It never lowers anything: a tag that is not rewound is left as it is.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := leafd.ValidateTag(args[0]); err != nil {
				return usageError{errors.New(leafd.ErrorMessage(err))}
			}
			return withStore(cmd.Context(), *configPath, stderr, true, func(ctx context.Context, db store.Store, _ *config.Config) error {
				r, err := db.RepairTag(ctx, args[0])
				if err != nil {
					return err
				}
				if r.Raised {
					fmt.Fprintf(stdout, "tag %s repaired: max_id %d -> %d (its high-water mark); servers serve it from their next request\n",
						r.After.Name, r.Before.MaxID, r.After.MaxID)
					return nil
				}
				mark := "none: leafd never loaded a range of it"
				if r.Mark > 0 {
					mark = strconv.FormatInt(r.Mark, 10)
				}
				fmt.Fprintf(stdout, "tag %s is not rewound: max_id %d, high-water mark %s; nothing changed\n", r.After.Name, r.After.MaxID, mark)
				return nil
			})
		},
	}
	tag.AddCommand(add, list, setStep, repair)
	return tag
}

// printTable writes rows, tab-separated, as a table under header; or
// missing, when err says the store has no table yet; or empty, after the
// header, when there are no rows.
func printTable(w io.Writer, err error, header string, rows []string, missing, empty string) error {
	if store.MissingTable(err) {
		fmt.Fprintln(w, missing)
		return nil
	}
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, empty)
	}
	return nil
}

// checkNewTag validates a tag to create as POST /api/tags does.
func checkNewTag(t leafd.Tag, maxStep int64) error {
	if err := cmp.Or(leafd.ValidateTag(t.Name), leafd.ValidateStep(t.Step, maxStep)); err != nil {
		return err
	}
	if t.MaxID < 1 || t.MaxID > leafd.MaxID-t.Step {
		return leafd.Errorf(leafd.EInvalidBody, "max-id %d is out of range: use 1 to %d", t.MaxID, leafd.MaxID-t.Step)
	}
	return leafd.ValidateDescription(t.Description)
}

// withStore opens the configured store, migrates it when migrate is asked
// for and store.migrate is on, refuses databases that do not match
// store.shards (verifyShards), and runs f with the configuration. A store
// error keeps its message: "tag exists", "not defined", "nothing accepts
// connections there".
func withStore(ctx context.Context, configPath string, stderr io.Writer, migrate bool, f func(context.Context, store.Store, *config.Config) error) error {
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
	// As a server would refuse them: a tag written through another list
	// than the deployment's, or into one of its databases alone, could be
	// a second definition of a tag that another database holds.
	if err := verifyShards(ctx, db); err != nil {
		return err
	}
	return commandError(f(ctx, db, cfg))
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

// formatFlags are the flags of leafd tag add that make a tag opaque or
// dated; given reports whether a flag was on the command line.
type formatFlags struct {
	format, period, zone string
	digits               int
	maxStep              int64
	given                func(flag string) bool
}

// apply gives t the format the flags ask for, checked as POST /api/tags
// checks it: an opaque tag the key fingerprint of key, a dated tag a
// max step of at most maxStep (segment.max_step).
func (f formatFlags) apply(t *leafd.Tag, maxStep int64, key []byte) error {
	if f.format != segment.FormatDated {
		for _, flag := range []string{"period", "zone", "max-step"} {
			if f.given(flag) {
				return usageError{fmt.Errorf("--%s applies to a dated tag only: add --format dated", flag)}
			}
		}
	}
	switch f.format {
	case segment.FormatSequential:
		if f.given("digits") {
			return usageError{errors.New("--digits applies to an opaque or dated tag only: add --format opaque or --format dated")}
		}
		return nil
	case segment.FormatOpaque:
		if err := segment.ValidateDigits(f.digits); err != nil {
			return usageError{errors.New(leafd.ErrorMessage(err))}
		}
		if key == nil {
			return usageError{errors.New("an opaque tag needs segment.opaque_key (LEAFD_SEGMENT_OPAQUE_KEY), the same on every server")}
		}
		t.Format, t.Digits, t.KeyFingerprint = segment.FormatOpaque, f.digits, segment.KeyFingerprint(key, t.Name)
		return nil
	case segment.FormatDated:
	default:
		return usageError{fmt.Errorf("--format %q is not known: use sequential, opaque or dated", f.format)}
	}
	if !f.given("period") {
		return usageError{errors.New("a dated tag needs a period: add --period day, month or year")}
	}
	digits := segment.DefaultDatedDigits
	if f.given("digits") {
		digits = f.digits
	}
	if err := segment.ValidateDated(f.period, f.zone, digits); err != nil {
		return usageError{errors.New(leafd.ErrorMessage(err))}
	}
	if f.given("max-step") && (f.maxStep < 1 || f.maxStep > maxStep) {
		return usageError{fmt.Errorf("--max-step %d is out of range: use 1 to %d (segment.max_step), or leave it out", f.maxStep, maxStep)}
	}
	t.Format, t.Period, t.Zone, t.Digits, t.MaxStep = segment.FormatDated, f.period, f.zone, digits, f.maxStep
	return nil
}

// formatOf words t's format for leafd tag list: sequential, opaque with
// its domain, or dated with its period, zone, counter width and max step.
func formatOf(t leafd.Tag) string {
	switch t.Format {
	case segment.FormatOpaque:
		if t.Digits == 0 {
			return "opaque (below 2^53)"
		}
		return fmt.Sprintf("opaque (%d digits)", t.Digits)
	case segment.FormatDated:
		zone := cmp.Or(t.Zone, "UTC")
		if t.MaxStep > 0 {
			return fmt.Sprintf("dated (%s, %s, %d digits, max step %d)", t.Period, zone, t.Digits, t.MaxStep)
		}
		return fmt.Sprintf("dated (%s, %s, %d digits)", t.Period, zone, t.Digits)
	}
	return segment.FormatSequential
}

// newDecodeOpaqueCommand returns `leafd decode-opaque TAG ID`.
func newDecodeOpaqueCommand(configPath *string, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "decode-opaque TAG ID",
		Short: "Print the position an ID of an opaque tag was mapped from (1 for its first ID), with the configured segment.opaque_key",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := leafd.ValidateTag(args[0]); err != nil {
				return usageError{errors.New(leafd.ErrorMessage(err))}
			}
			return withStore(cmd.Context(), *configPath, stderr, false, func(ctx context.Context, db store.Store, cfg *config.Config) error {
				t, err := db.LookupTag(ctx, args[0])
				if err != nil {
					return err
				}
				pos, err := segment.DecodeOpaque(opaqueKey(cfg), t, args[1])
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(stdout, "%d\n", pos)
				return err
			})
		},
	}
}
