package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/config"
	"github.com/leafd/leafd/store"
)

// newTokenCommand returns `leafd token` and its subcommands: the access
// tokens of the ID routes (segment.require_token,
// snowflake.require_token), made, listed and revoked in the configured
// store directly, as `leafd tag` does. Servers take a change up within
// their next reading of the tokens (2 s).
func newTokenCommand(configPath *string, stdout, stderr io.Writer) *cobra.Command {
	token := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke access tokens of the ID routes in the configured store",
		Args:  cobra.NoArgs,
	}
	var (
		tags        string
		description string
	)
	add := &cobra.Command{
		Use:   "add --tags order,pay* [--description S]",
		Short: "Make a token allowing the tags (names, prefixes ending in *, or * for all; snowflake for the snowflake routes) and print it once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list := strings.Split(tags, ",")
			for i := range list {
				list[i] = strings.TrimSpace(list[i])
			}
			if strings.TrimSpace(tags) == "" {
				return usageError{errors.New("--tags is required: the tag patterns the token allows, comma-separated, such as --tags order,pay*")}
			}
			if _, err := store.ValidateTokenTags(list); err != nil {
				return usageError{errors.New(leafd.ErrorMessage(err))}
			}
			if err := leafd.ValidateDescription(description); err != nil {
				return usageError{errors.New(leafd.ErrorMessage(err))}
			}
			return withStore(cmd.Context(), *configPath, stderr, true, func(ctx context.Context, db store.Store, _ *config.Config) error {
				t, text, err := db.CreateToken(ctx, list, description)
				if err != nil {
					return err
				}
				fmt.Fprintf(stderr, "created token %s for %s; it is shown once, here:\n", t.ID, strings.Join(t.Tags, ","))
				fmt.Fprintln(stdout, text)
				return nil
			})
		},
	}
	add.Flags().StringVar(&tags, "tags", "", "the tag patterns the token allows, comma-separated: order,pay* (* alone: every tag; snowflake: the snowflake routes)")
	add.Flags().StringVar(&description, "description", "", "who or what the token is for")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the tokens: id, tags, creation time, description (never the token itself)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd.Context(), *configPath, stderr, false, func(ctx context.Context, db store.Store, _ *config.Config) error {
				tokens, err := db.ListTokens(ctx)
				rows := make([]string, len(tokens))
				for i, t := range tokens {
					rows[i] = fmt.Sprintf("%s\t%s\t%s\t%s", t.ID, strings.Join(t.Tags, ","), t.Created.UTC().Format(time.DateTime), t.Description)
				}
				return printTable(stdout, err, "ID\tTAGS\tCREATED (UTC)\tDESCRIPTION", rows,
					"(no tokens: the store has no leafd_token table yet; leafd migrate creates it)",
					"(no tokens: make one with leafd token add --tags TAG)")
			})
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: every server refuses it within seconds",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd.Context(), *configPath, stderr, false, func(ctx context.Context, db store.Store, _ *config.Config) error {
				if err := db.RevokeToken(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "revoked token %s (every server refuses it from its next reading of the tokens, within 2 s)\n", args[0])
				return nil
			})
		},
	}
	token.AddCommand(add, list, revoke)
	return token
}
