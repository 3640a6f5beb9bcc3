package rpc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"google.golang.org/grpc/codes"

	"github.com/leafd/leafd"
)

// errorCodes returns every error code errors.go declares: the string
// constants whose names start with E.
func errorCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "E") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				code, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, code)
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("found only %d error codes in errors.go: %v", len(out), out)
	}
	return out
}

// Every code of errors.go has a gRPC code in the one table, and the table
// holds no code errors.go does not declare: a code added without a mapping
// fails here.
func TestEveryErrorCodeMapped(t *testing.T) {
	declared := map[string]bool{}
	for _, code := range errorCodes(t) {
		declared[code] = true
		c, ok := grpcCodes[code]
		if !ok {
			t.Errorf("error code %q (errors.go) has no gRPC code in grpcCodes (rpc/errors.go) nor a row in docs/grpc.md", code)
			continue
		}
		if c == codes.OK || c == codes.Unknown {
			t.Errorf("error code %q maps to %s", code, c)
		}
		st := Status(leafd.Errorf(code, "m"))
		if st.Code() != c || st.Code() != Code(leafd.Errorf(code, "m")) {
			t.Errorf("%q: Status gives %s, Code %s, the table %s", code, st.Code(), Code(leafd.Errorf(code, "m")), c)
		}
	}
	for code := range grpcCodes {
		if !declared[code] {
			t.Errorf("grpcCodes maps %q, which errors.go does not declare", code)
		}
	}
}

// The table of docs/grpc.md is the table of the code: one row per leafd
// code, with its gRPC code.
func TestErrorTableDocumented(t *testing.T) {
	rows := docRows(t)
	for code, c := range grpcCodes {
		if got, ok := rows[code]; !ok {
			t.Errorf("docs/grpc.md has no row for %q", code)
		} else if got != grpcName(c) {
			t.Errorf("docs/grpc.md maps %q to %s, the code to %s", code, got, grpcName(c))
		}
	}
	for code := range rows {
		if _, ok := grpcCodes[code]; !ok {
			t.Errorf("docs/grpc.md has a row for %q, which the code does not map", code)
		}
	}
}

// The contract's requirement, spelled out: the codes named in it map as it
// says.
func TestContractedMapping(t *testing.T) {
	want := map[string]codes.Code{
		leafd.EInvalidTag: codes.InvalidArgument, leafd.EInvalidCount: codes.InvalidArgument,
		leafd.EInvalidSize: codes.InvalidArgument, leafd.EInvalidID: codes.InvalidArgument,
		leafd.EUnknownTag: codes.NotFound, leafd.EModeDisabled: codes.NotFound,
		leafd.ETokenRequired: codes.Unauthenticated, leafd.ETokenRefused: codes.PermissionDenied,
		leafd.ESegmentUnavailable: codes.Unavailable, leafd.ESnowflakeUnavailable: codes.Unavailable,
		leafd.EStoreUnavailable: codes.Unavailable, leafd.ENotReady: codes.Unavailable,
		leafd.ETagExhausted: codes.ResourceExhausted, leafd.EPeriodExhausted: codes.ResourceExhausted,
		leafd.ETagRewound: codes.FailedPrecondition, leafd.EOpaqueKeyMismatch: codes.FailedPrecondition,
		leafd.ERangeUnsupported: codes.FailedPrecondition, leafd.EInternal: codes.Internal,
	}
	for code, c := range want {
		if grpcCodes[code] != c {
			t.Errorf("%s maps to %s, want %s", code, grpcCodes[code], c)
		}
	}
}

// docRows reads the error table of docs/grpc.md: rows whose first column is
// a leafd code and second a gRPC code, both in backticks.
func docRows(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../docs/grpc.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) < 4 || strings.TrimSpace(cols[0]) != "" {
			continue
		}
		code, ok1 := ticked(cols[1])
		grpc, ok2 := ticked(cols[2])
		if !ok1 || !ok2 || strings.ToUpper(grpc) != grpc {
			continue
		}
		if _, dup := rows[code]; dup {
			t.Errorf("docs/grpc.md has two rows for %q", code)
		}
		rows[code] = grpc
	}
	return rows
}

// ticked returns the text of a table cell that is one `code`.
func ticked(cell string) (string, bool) {
	cell = strings.TrimSpace(cell)
	if len(cell) < 3 || cell[0] != '`' || cell[len(cell)-1] != '`' || strings.Count(cell, "`") != 2 {
		return "", false
	}
	return cell[1 : len(cell)-1], true
}

// grpcName is a code as gRPC's specification writes it: INVALID_ARGUMENT.
func grpcName(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && unicode.IsUpper(r) && c != codes.OK {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}
