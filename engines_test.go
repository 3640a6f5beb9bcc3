package leafd_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// engineDrivers are the database drivers of the engines, by module path:
// only the engine's package imports its driver. An engine with a new
// driver adds it here.
var engineDrivers = []string{"github.com/go-sql-driver/mysql", "github.com/jackc/pgx", "modernc.org/sqlite"}

// engineImporters are the directories, besides the engines', whose files
// may import an engine's package or driver.
var engineImporters = []string{
	"store/all",        // the registration of every engine
	"internal/testkit", // test infrastructure that creates databases on real servers and starts them
	"e2e",              // the end-to-end suite: real servers, whose databases it reads
	"deploy",           // tests of the deployment files, which parse their DSNs
}

// TestEnginesStayInTheirPackages: no Go file outside an engine's package
// (a package store/all imports) imports that package or an engine's
// driver, but for engineImporters. Code that needs an engine asks the
// registry (store.Drivers, testdb.Each and its look-ups) instead.
func TestEnginesStayInTheirPackages(t *testing.T) {
	engines := engineDirs(t)
	if len(engines) == 0 {
		t.Fatal("store/all imports no engine")
	}
	isEngine := func(imp string) bool {
		for _, p := range engineDrivers {
			if under(imp, p) {
				return true
			}
		}
		for _, dir := range engines {
			if under(imp, module+"/"+dir) {
				return true
			}
		}
		return false
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		path = filepath.ToSlash(path)
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || within(path, engines) || within(path, engineImporters) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil || !isEngine(imp) {
				continue
			}
			t.Errorf("%s imports %s: only the engine's own package may; ask the registry (store.Drivers, testdb.Each and its look-ups), or move the test into the engine's package", path, imp)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// engineDirs returns the directories of the engines: the packages of the
// module that store/all imports.
func engineDirs(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("store", "all", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			if dir, ok := strings.CutPrefix(imp, module+"/"); ok {
				dirs = append(dirs, dir)
			}
		}
	}
	return dirs
}

// under reports whether the import path imp is pkg or a package below it.
func under(imp, pkg string) bool { return imp == pkg || strings.HasPrefix(imp, pkg+"/") }

// within reports whether the file path is in one of dirs or below.
func within(path string, dirs []string) bool {
	for _, dir := range dirs {
		if strings.HasPrefix(path, dir+"/") {
			return true
		}
	}
	return false
}
