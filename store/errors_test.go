package store

import (
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No store message anywhere speaks of buffers: one-shot commands print
// them too.
func TestStoreMessagesSayNothingOfBuffers(t *testing.T) {
	err := filepath.WalkDir(".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return err
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "from buffers") {
			t.Errorf("%s speaks of serving from buffers", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var ro *retriedOut
	if !errors.As(&retriedOut{err: sql.ErrConnDone, tries: 2}, &ro) || !errors.Is(ro, sql.ErrConnDone) {
		t.Fatal("retriedOut does not unwrap to its cause")
	}
}
