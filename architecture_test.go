package leafd_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/leafd/leafd"

// TestArchitectureImports holds the import graph that docs/architecture.md
// states against the one go list reports: every package of the module
// with Go code is stated once, and its imports of other packages of the
// module are exactly the ones stated. So that the map cannot drift from the
// code.
func TestArchitectureImports(t *testing.T) {
	stated := statedGraph(t)
	out, err := exec.Command("go", "list", "-f",
		`{{if .GoFiles}}{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	actual := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var deps []string
		for _, imp := range f[1:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				deps = append(deps, short(imp))
			}
		}
		slices.Sort(deps)
		actual[short(f[0])] = deps
	}
	for pkg, deps := range actual {
		want, ok := stated[pkg]
		if !ok {
			t.Errorf("docs/architecture.md does not state package %s (it imports %s)", pkg, list(deps))
			continue
		}
		if !slices.Equal(want, deps) {
			t.Errorf("docs/architecture.md states %s → %s; the code imports %s", pkg, list(want), list(deps))
		}
	}
	for pkg := range stated {
		if _, ok := actual[pkg]; !ok {
			t.Errorf("docs/architecture.md states package %s, which holds no Go code", pkg)
		}
	}
}

// TestArchitecturePaths: every function that docs/architecture.md names on
// a request path (the fenced blocks under "## Request paths", items joined
// by →, each pkg.Func or pkg.Type.Method) exists.
func TestArchitecturePaths(t *testing.T) {
	funcs := map[string]map[string]bool{} // package → its functions, as Func or Type.Method
	named := 0
	for _, block := range fencedBlocks(t, "## Request paths") {
		for _, item := range strings.Split(strings.ReplaceAll(block, "\n", " "), "→") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			named++
			slash := strings.LastIndex(item, "/")
			dot := strings.Index(item[slash+1:], ".")
			if dot < 0 {
				t.Errorf("%q on a request path is not pkg.Func or pkg.Type.Method", item)
				continue
			}
			pkg, name := item[:slash+1+dot], item[slash+2+dot:]
			if funcs[pkg] == nil {
				funcs[pkg] = functionsOf(t, pkg)
			}
			if !funcs[pkg][name] {
				t.Errorf("docs/architecture.md names %s on a request path; package %s has no %s", item, pkg, name)
			}
		}
	}
	if named < 10 {
		t.Fatalf("found %d functions on the request paths of docs/architecture.md: is the section there?", named)
	}
}

// short turns an import path of the module into the name the page uses.
func short(path string) string {
	if path == module {
		return "leafd"
	}
	return strings.TrimPrefix(path, module+"/")
}

func list(deps []string) string {
	if len(deps) == 0 {
		return "nothing"
	}
	return strings.Join(deps, ", ")
}

// statedGraph reads the graph of the first fenced block under
// "## Packages": lines "pkg → dep, dep", "nothing" for none, and a
// parenthesised remark at the end of a line ignored.
func statedGraph(t *testing.T) map[string][]string {
	blocks := fencedBlocks(t, "## Packages")
	if len(blocks) == 0 {
		t.Fatal(`docs/architecture.md has no fenced block under "## Packages"`)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(blocks[0], "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		pkg, deps, ok := strings.Cut(line, "→")
		if !ok {
			t.Fatalf("docs/architecture.md: %q in the import graph has no →", line)
		}
		pkg = strings.TrimSpace(pkg)
		if _, dup := g[pkg]; dup {
			t.Errorf("docs/architecture.md states %s twice", pkg)
		}
		if i := strings.Index(deps, "("); i >= 0 {
			deps = deps[:i]
		}
		var ds []string
		for _, d := range strings.Split(deps, ",") {
			if d = strings.TrimSpace(d); d != "" && d != "nothing" {
				ds = append(ds, d)
			}
		}
		slices.Sort(ds)
		g[pkg] = ds
	}
	return g
}

// fencedBlocks returns the fenced code blocks of docs/architecture.md
// between the heading and the next heading of the same level.
func fencedBlocks(t *testing.T, heading string) []string {
	f, err := os.Open(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []string
	var in, fenced bool
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case fenced && strings.HasPrefix(line, "```"):
			blocks = append(blocks, b.String())
			b.Reset()
			fenced = false
		case fenced:
			b.WriteString(line + "\n")
		case strings.HasPrefix(line, "## "):
			in = line == heading
		case in && strings.HasPrefix(line, "```"):
			fenced = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// functionsOf parses the package at dir (relative to the module's root;
// "leafd" is the root) and returns its functions and methods, as Func and
// Type.Method.
func functionsOf(t *testing.T, dir string) map[string]bool {
	if dir == "leafd" {
		dir = "."
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("package %s: no Go files (%v)", dir, err)
	}
	names := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fd.Recv == nil {
				names[fd.Name.Name] = true
				continue
			}
			typ := fd.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if ix, ok := typ.(*ast.IndexExpr); ok {
				typ = ix.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				names[id.Name+"."+fd.Name.Name] = true
			}
		}
	}
	return names
}
