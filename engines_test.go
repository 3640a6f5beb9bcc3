package leafd_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
	_ "github.com/leafd/leafd/store/all" // every engine, whose names the files must not hold
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
	walkOutsideEngines(t, engines, func(path string) error {
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
}

// TestEngineNamesStayInTheirPackages: no Go file outside an engine's
// package and engineImporters holds a string literal that is an engine's
// name, store.driver's (store.Drivers) or its database/sql driver's
// (testdb.SQLDriver): code that needs an engine asks the registry for one
// by what it can do (store.DefaultDriver, store.FallbackDrivers,
// store.HasAddresses) and the test kit for its databases, rather than
// name it; a test about one engine's behaviour lives in the engine's
// package.
func TestEngineNamesStayInTheirPackages(t *testing.T) {
	engines := engineDirs(t)
	names := map[string]bool{}
	for _, d := range store.Drivers() {
		names[d], names[testdb.SQLDriver(d)] = true, true
	}
	if len(names) == 0 {
		t.Fatal("no engine registered")
	}
	walkOutsideEngines(t, engines, func(path string) error {
		if path == "engines_test.go" { // this test
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if setting := setsDriver(s, names); setting != "" {
				t.Errorf("%s: %s sets %s: ask the registry (store.DefaultDriver, store.FallbackDrivers) and testdb for the engine", fset.Position(lit.Pos()), lit.Value, setting)
				return true
			}
			if !names[s] {
				return true
			}
			t.Errorf("%s: %s names an engine: ask the registry (store.DefaultDriver, store.FallbackDrivers) and testdb for it, or move the test into the engine's package", fset.Position(lit.Pos()), lit.Value)
			return true
		})
		return nil
	})
}

// walkOutsideEngines calls f with the path of every Go file of the module
// outside the engines' packages and engineImporters (and testdata, vendor
// and hidden directories), failing t on an error.
func walkOutsideEngines(t *testing.T, engines []string, f func(path string) error) {
	t.Helper()
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
		return f(path)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setsDriver returns the setting of store.driver to an engine by name
// that s holds, as the environment (LEAFD_STORE_DRIVER=sqlite) or YAML
// (driver: sqlite) writes it; "" when it holds none.
func setsDriver(s string, names map[string]bool) string {
	for name := range names {
		for _, form := range []string{"DRIVER=" + name, "driver: " + name} {
			for rest := s; ; {
				i := strings.Index(rest, form)
				if i < 0 {
					break
				}
				rest = rest[i+len(form):]
				if rest == "" || !isWordByte(rest[0]) {
					return form
				}
			}
		}
	}
	return ""
}

func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
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
