package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// LeafdPackage is the import path of the leafd command that Build builds.
const LeafdPackage = "github.com/leafd/leafd/cmd/leafd"

// BuildOptions configure Build. The zero value builds without the race
// detector, in the working directory, and returns go build's output in the
// error when the build fails.
type BuildOptions struct {
	// Race builds with -race.
	Race bool
	// Dir is where go build runs: any directory inside the leafd module.
	// Empty means the working directory (a test's is its package's).
	Dir string
	// Output receives go build's output as it comes. Nil keeps it, to
	// return in the error of a failed build.
	Output io.Writer
}

// Build builds leafd (LeafdPackage) into the file bin.
//
// Errors: go is not in PATH, or the build failed (with go build's output
// unless o.Output took it); ctx ended first.
func Build(ctx context.Context, bin string, o BuildOptions) error {
	args := []string{"build", "-o", bin}
	if o.Race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, LeafdPackage)...)
	cmd.Dir = o.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if o.Output != nil {
		cmd.Stdout, cmd.Stderr = o.Output, o.Output
	}
	if err := cmd.Run(); err != nil {
		if out.Len() > 0 {
			return fmt.Errorf("go build %s: %w\n%s", LeafdPackage, err, bytes.TrimSpace(out.Bytes()))
		}
		return fmt.Errorf("go build %s: %w", LeafdPackage, err)
	}
	return nil
}

// Binary is a leafd binary built on first use, at most once, in a
// temporary directory of its own: one per test binary (or leafbench run)
// that every test shares. Its fields are read at the first Path.
type Binary struct {
	// Race builds with the race detector.
	Race bool
	// Output receives go build's output; nil returns it in Path's error.
	Output io.Writer

	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the binary the first time it is called and returns its
// path; later calls return the same path, or the same error.
//
// Errors: those of Build, or no temporary directory.
func (b *Binary) Path() (string, error) {
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "leafd-bin-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "leafd")
		b.err = Build(context.Background(), b.path, BuildOptions{Race: b.Race, Output: b.Output})
	})
	return b.path, b.err
}

// Remove deletes the binary and its directory, if it was built. Call it
// once every process started from it has ended (after m.Run in TestMain).
func (b *Binary) Remove() {
	b.once.Do(func() { b.err = errors.New("testenv: the leafd binary was removed before it was built") })
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}
