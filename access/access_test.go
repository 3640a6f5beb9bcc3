package access_test

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"strings"
	"testing"
)

// TestTokenCompareConstantTime: the check compares the presented token's
// hash with subtle.ConstantTimeCompare, also for an unknown id (against a
// dummy hash), never with == or bytes.Equal.
func TestTokenCompareConstantTime(t *testing.T) {
	f, err := parser.ParseFile(gotoken.NewFileSet(), "access.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "allowed" {
			return true
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "subtle" && sel.Sel.Name == "ConstantTimeCompare" {
						found = true
					}
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "bytes" {
						t.Errorf("allowed compares with bytes.%s", sel.Sel.Name)
					}
				}
			case *ast.BinaryExpr:
				if (n.Op == gotoken.EQL || n.Op == gotoken.NEQ) && strings.Contains(types(n), "hash") {
					t.Errorf("allowed compares a hash with %s", n.Op)
				}
			}
			return true
		})
		return false
	})
	if !found {
		t.Fatal("(*Checker).allowed does not call subtle.ConstantTimeCompare")
	}
}

func types(n *ast.BinaryExpr) string {
	var names []string
	for _, e := range []ast.Expr{n.X, n.Y} {
		ast.Inspect(e, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				names = append(names, id.Name)
			}
			return true
		})
	}
	return strings.Join(names, " ")
}
