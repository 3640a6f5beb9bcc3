package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/access"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

const (
	specFile   = "openapi.yaml"
	adminToken = "s3cret-token"
)

var quiet = slog.New(slog.DiscardHandler)

// methods are the operation keys of an OpenAPI path item.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// spec is openapi.yaml decoded: as generic YAML values (maps, slices,
// strings, numbers), converted through JSON so that the schema validator
// reads it as it reads a JSON document.
type spec struct {
	doc map[string]any
}

func loadSpec(t *testing.T) *spec {
	t.Helper()
	b, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	var y any
	if err := yaml.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s is not YAML: %v", specFile, err)
	}
	j, err := json.Marshal(y)
	if err != nil {
		t.Fatalf("%s does not convert to JSON (a key that is not a string?): %v", specFile, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		t.Fatalf("%s is not a mapping", specFile)
	}
	return &spec{doc: m}
}

// at returns the value at a JSON pointer ("/paths/~1healthz/get"), or nil.
func (s *spec) at(ptr string) any {
	var v any = s.doc
	if ptr == "" {
		return v
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// resolve follows $ref from the object at ptr to its target, and returns
// the target's pointer.
func (s *spec) resolve(ptr string) string {
	for range 10 {
		m, ok := s.at(ptr).(map[string]any)
		if !ok {
			return ptr
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return ptr
		}
		ptr = strings.TrimPrefix(ref, "#")
	}
	return ptr
}

func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// operations returns "METHOD /path" for every documented operation.
func (s *spec) operations() []string {
	var out []string
	paths, _ := s.doc["paths"].(map[string]any)
	for p, item := range paths {
		item, _ := item.(map[string]any)
		for _, m := range methods {
			if _, ok := item[m]; ok {
				out = append(out, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// options switch parts of a test server off.
type options struct {
	noAdmin      bool // no admin token: the admin routes answer admin_disabled
	protect      bool // admin.protect_dashboard
	segmentOff   bool
	snowflakeOff bool
	unready      bool // the tag list never read, no worker id leased
	opaque       bool // segment.opaque_key is testOpaqueKey
	tokens       bool // segment and snowflake require_token; testAccessToken allows "order"
}

// testAccessToken is the access token, allowing the tag "order" alone, of
// the last server made with tokens set; testAccessTokenID its id.
var testAccessToken, testAccessTokenID string

// testOpaqueKey is the segment.opaque_key of the servers with opaque set;
// every server has the opaque tag "secret", created with it.
var testOpaqueKey = []byte("0123456789abcdef0123456789abcdef")

// newServer is a leafd HTTP server over SQLite with every mode on (unless
// opts say otherwise): real allocators, the admin routes with a token, the
// store's health.
func newServer(t *testing.T, opts options) *leafhttp.Server {
	t.Helper()
	s, err := store.Open(store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "order", Step: 1000, MaxID: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "secret", Step: 1000, MaxID: 1, Format: segment.FormatOpaque,
		KeyFingerprint: segment.KeyFingerprint(testOpaqueKey, "secret")}); err != nil {
		t.Fatal(err)
	}
	acc := access.New(access.Config{Store: s, Segment: opts.tokens, Snowflake: opts.tokens, Logger: quiet})
	t.Cleanup(acc.Close)
	cfg := leafhttp.Config{Store: s, Tags: s, Tokens: s, Logger: quiet, AdminToken: adminToken, ProtectDashboard: opts.protect,
		Access: acc}
	if opts.tokens {
		tok, text, err := s.CreateToken(ctx, []string{"order"}, "api test")
		if err != nil {
			t.Fatal(err)
		}
		testAccessToken, testAccessTokenID = text, tok.ID
	}
	var key []byte
	if opts.opaque {
		key = testOpaqueKey
		cfg.OpaqueKey = key
	}
	if opts.noAdmin {
		cfg.AdminToken = ""
	}
	if !opts.segmentOff {
		a, err := segment.New(s, segment.Config{WaitTimeout: 100 * time.Millisecond, TagRefresh: time.Hour, Logger: quiet, OpaqueKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if !opts.unready {
			if err := a.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			a.Start()
		}
		t.Cleanup(func() { a.Close() })
		cfg.Segment = a
	}
	if !opts.snowflakeOff {
		set := snowflake.Settings{WorkerID: 5, Logger: quiet}
		if opts.unready {
			// Leasing, but never started: no worker id.
			set = snowflake.Settings{Leases: s, WaitTimeout: 100 * time.Millisecond, Logger: quiet}
		}
		g, err := snowflake.New(set)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		cfg.Snowflake = g
	}
	srv := leafhttp.New(cfg)
	if opts.tokens { // the checker reads its tokens in the background
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/segment/order", nil)
			req.Header.Set("Authorization", "Bearer "+testAccessToken)
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code == http.StatusOK {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("the server has not read its access tokens after 10 s: %d %s", rec.Code, rec.Body)
			}
		}
	}
	return srv
}

// TestRoutesDocumented: every route the server registers is in the spec,
// and every operation of the spec is a registered route.
func TestRoutesDocumented(t *testing.T) {
	sp := loadSpec(t)
	var registered []string
	for _, r := range newServer(t, options{}).Routes() {
		registered = append(registered, r.Method+" "+r.Path)
	}
	sort.Strings(registered)
	documented := sp.operations()
	if len(registered) < 10 {
		t.Fatalf("the server registers %d routes: %v", len(registered), registered)
	}
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is served but not in %s", r, specFile)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("%s is in %s but not served", d, specFile)
		}
	}
}

// errorCodes returns the values of the E… string constants of errors.go:
// every error code of the contract.
func errorCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !regexp.MustCompile(`^E[A-Z]`).MatchString(name.Name) || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					code, _ := strconv.Unquote(lit.Value)
					codes = append(codes, code)
				}
			}
		}
	}
	if len(codes) < 15 || !slices.Contains(codes, leafd.EUnknownTag) {
		t.Fatalf("errors.go yields the codes %v: did its layout change?", codes)
	}
	sort.Strings(codes)
	return codes
}

// TestErrorCodes: the spec's ErrorCode enum is exactly the codes of
// errors.go, and each ErrorNNN response lists codes that errors.go
// maps to NNN, together covering every code.
func TestErrorCodes(t *testing.T) {
	sp := loadSpec(t)
	codes := errorCodes(t)
	var enum []string
	for _, v := range asSlice(sp.at("/components/schemas/ErrorCode/enum")) {
		enum = append(enum, v.(string))
	}
	sort.Strings(enum)
	if !slices.Equal(enum, codes) {
		t.Errorf("ErrorCode enum %v, errors.go %v", enum, codes)
	}

	covered := map[string]string{}
	responses, _ := sp.at("/components/responses").(map[string]any)
	re := regexp.MustCompile(`^Error([1-5][0-9][0-9])$`)
	for name := range responses {
		m := re.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		status, _ := strconv.Atoi(m[1])
		list := asSlice(sp.at("/components/responses/" + name + "/content/application~1json/schema/allOf/1/properties/error/properties/code/enum"))
		if len(list) == 0 {
			t.Errorf("%s lists no codes", name)
		}
		for _, c := range list {
			code := c.(string)
			if got := leafhttp.ErrorStatus(leafd.Errorf(code, "x")); got != status {
				t.Errorf("%s lists %s, which the server answers with %d", name, code, got)
			}
			if prev, dup := covered[code]; dup {
				t.Errorf("%s is listed by %s and %s", code, prev, name)
			}
			covered[code] = name
		}
	}
	for _, c := range codes {
		if _, ok := covered[c]; !ok {
			t.Errorf("no ErrorNNN response lists %s", c)
		}
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// TestSpecCoherent: an OpenAPI 3.1 document whose references all resolve,
// whose path parameters are declared, whose operations have unique ids,
// and whose security is the contract's: the bearer token on /api/tags,
// optional bearer or Basic on the dashboard and its state.
func TestSpecCoherent(t *testing.T) {
	sp := loadSpec(t)
	if v, _ := sp.doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", v)
	}
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				if !strings.HasPrefix(ref, "#/") || sp.at(strings.TrimPrefix(ref, "#")) == nil {
					t.Errorf("%s: $ref %q does not resolve", ptr, ref)
				}
			}
			for k, e := range x {
				walk(ptr+"/"+escape(k), e)
			}
		case []any:
			for i, e := range x {
				walk(ptr+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("", sp.doc)

	for name, scheme := range map[string]string{"adminBearer": "bearer", "dashboardBasic": "basic"} {
		ptr := "/components/securitySchemes/" + name
		if sp.at(ptr+"/type") != "http" || sp.at(ptr+"/scheme") != scheme {
			t.Errorf("security scheme %s is %v, want http %s", name, sp.at(ptr), scheme)
		}
	}

	ids := map[string]string{}
	param := regexp.MustCompile(`\{([^}]+)\}`)
	for _, op := range sp.operations() {
		method, path, _ := strings.Cut(op, " ")
		ptr := "/paths/" + escape(path) + "/" + strings.ToLower(method)
		o, _ := sp.at(ptr).(map[string]any)
		id, _ := o["operationId"].(string)
		if id == "" {
			t.Errorf("%s has no operationId", op)
		} else if prev, dup := ids[id]; dup {
			t.Errorf("operationId %s of %s and %s", id, prev, op)
		}
		ids[id] = op
		if r, _ := o["responses"].(map[string]any); len(r) == 0 {
			t.Errorf("%s documents no response", op)
		}
		var inPath []string
		for i := range asSlice(o["parameters"]) {
			p, _ := sp.at(sp.resolve(ptr + "/parameters/" + strconv.Itoa(i))).(map[string]any)
			if p["in"] == "path" {
				if p["required"] != true {
					t.Errorf("%s: path parameter %v is not required", op, p["name"])
				}
				inPath = append(inPath, p["name"].(string))
			}
		}
		var want []string
		for _, m := range param.FindAllStringSubmatch(path, -1) {
			want = append(want, m[1])
		}
		sort.Strings(inPath)
		sort.Strings(want)
		if !slices.Equal(inPath, want) {
			t.Errorf("%s declares path parameters %v, its template has %v", op, inPath, want)
		}

		sec := fmt.Sprint(o["security"])
		switch {
		case strings.HasPrefix(path, "/api/tags"), strings.HasPrefix(path, "/api/tokens"):
			if sec != "[map[adminBearer:[]]]" {
				t.Errorf("%s security %s, want adminBearer alone", op, sec)
			}
		case path == "/segment/{tag}" || path == "/segment/{tag}/range" || path == "/api/segment/get/{tag}" || path == "/snowflake" || path == "/api/snowflake/get/{key}":
			if sec != "[map[] map[accessToken:[]]]" { // segment.require_token, snowflake.require_token
				t.Errorf("%s security %s, want none or accessToken", op, sec)
			}
		case path == "/" || path == "/dashboard" || path == "/api/state" || path == "/metrics":
			if sec != "[map[] map[adminBearer:[]] map[dashboardBasic:[]]]" {
				t.Errorf("%s security %s, want none, adminBearer or dashboardBasic", op, sec)
			}
		default: // public, and saying so: an operation without security reads as one that forgot it
			if s, ok := o["security"].([]any); !ok || len(s) != 0 {
				t.Errorf("%s has security %s, want [] (only the admin routes, the ID routes and the dashboard are guarded)", op, sec)
			}
		}

		// Redocly's operation-2xx-response, which redocly.yaml turns off
		// for GET /, whose answer is a redirect.
		success := "2"
		if op == "GET /" {
			success = "3"
		}
		if !slices.ContainsFunc(keys(asMap(o["responses"])), func(s string) bool { return strings.HasPrefix(s, success) }) {
			t.Errorf("%s documents no %sxx answer", op, success)
		}
	}
	if sp.doc["security"] != nil {
		t.Error("a global security requirement would guard the ID routes")
	}

	// Redocly's no-unused-components, which redocly.yaml turns off for
	// these answers given on any path before routing (or, 405, for a method
	// no operation has): OpenAPI has no place for an answer of every path.
	// responses_test.go reads Error405 for a method a path does not take.
	anyPath := []string{"Error405", "Error431", "Error501", "Error505"}
	refs := map[string]bool{}
	var collect func(v any)
	collect = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				refs[ref] = true
			}
			for _, e := range x {
				collect(e)
			}
		case []any:
			for _, e := range x {
				collect(e)
			}
		}
	}
	collect(sp.doc)
	for kind, m := range asMap(sp.doc["components"]) {
		if kind == "securitySchemes" { // named by security requirements, not $ref
			continue
		}
		for name := range asMap(m) {
			used := refs["#/components/"+kind+"/"+name]
			if kind == "responses" && slices.Contains(anyPath, name) {
				if used {
					t.Errorf("components/responses/%s is now referenced: drop it from the exceptions", name)
				}
				continue
			}
			if !used {
				t.Errorf("components/%s/%s is never used", kind, name)
			}
		}
	}
}

// contractFile is the contract whose route and error tables
// TestContractMatchesOpenAPI reads.
const contractFile = "../docs/contract.md"

// contractTable returns the rows of the first table under the heading
// named heading in the contract, as trimmed cells (the header and the
// separator row left out), with the line number of each row.
func contractTable(t *testing.T, heading string) (rows [][]string, lines []int) {
	t.Helper()
	b, err := os.ReadFile(contractFile)
	if err != nil {
		t.Fatal(err)
	}
	in, seen, header := false, false, true
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			if in {
				break
			}
			in = strings.TrimSpace(strings.TrimLeft(line, "#")) == heading
			seen = seen || in
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 || !header {
				break // the table ended
			}
			continue
		}
		if header { // the header row, then the separator
			if strings.Trim(line, "|-: ") == "" {
				header = false
			}
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
		lines = append(lines, i+1)
	}
	if !seen {
		t.Fatalf("%s has no heading %q: the test reads its table there", contractFile, heading)
	}
	return rows, lines
}

// TestContractMatchesOpenAPI holds docs/contract.md and openapi.yaml
// together: every route of the contract's route table (section Routes) is
// an operation of the spec and the reverse; every code of its error table
// (section Error codes) is a code of errors.go and of the spec's ErrorCode
// enum, with the status errors.go gives it, and the reverse.
func TestContractMatchesOpenAPI(t *testing.T) {
	sp := loadSpec(t)

	t.Run("Routes", func(t *testing.T) {
		route := regexp.MustCompile("^`(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) (/[^` ?]*)`$")
		rows, lines := contractTable(t, "Routes")
		var inContract []string
		for i, r := range rows {
			m := route.FindStringSubmatch(r[0])
			if m == nil {
				t.Errorf("%s:%d: the first cell of the route table is %q; write one route per row as `METHOD /path`", contractFile, lines[i], r[0])
				continue
			}
			op := m[1] + " " + m[2]
			if slices.Contains(inContract, op) {
				t.Errorf("%s:%d: %s is in the route table twice", contractFile, lines[i], op)
			}
			inContract = append(inContract, op)
		}
		if len(inContract) < 10 {
			t.Fatalf("%s: the route table under Routes has %d routes (%v): did its format change?", contractFile, len(inContract), inContract)
		}
		documented := sp.operations()
		for _, op := range inContract {
			if !slices.Contains(documented, op) {
				t.Errorf("%s is in the route table of %s but not an operation of %s", op, contractFile, specFile)
			}
		}
		for _, op := range documented {
			if !slices.Contains(inContract, op) {
				t.Errorf("%s is an operation of %s but not in the route table of %s", op, specFile, contractFile)
			}
		}
	})

	t.Run("ErrorCodes", func(t *testing.T) {
		code := regexp.MustCompile("^`([a-z_]+)`$")
		rows, lines := contractTable(t, "Error codes")
		inContract := map[string]int{} // code → status
		for i, r := range rows {
			if len(r) < 2 {
				t.Errorf("%s:%d: an error table row needs | status | `code` | when |", contractFile, lines[i])
				continue
			}
			status, err := strconv.Atoi(r[0])
			m := code.FindStringSubmatch(r[1])
			if err != nil || status < 100 || status > 599 || m == nil {
				t.Errorf("%s:%d: error table row %q: write | status | `code` | when |, one code per row", contractFile, lines[i], strings.Join(r, " | "))
				continue
			}
			if _, dup := inContract[m[1]]; dup {
				t.Errorf("%s:%d: %s is in the error table twice", contractFile, lines[i], m[1])
			}
			inContract[m[1]] = status
			if got := leafhttp.ErrorStatus(leafd.Errorf(m[1], "x")); got != status {
				t.Errorf("%s:%d: the error table gives %s the status %d; errors.go gives it %d", contractFile, lines[i], m[1], status, got)
			}
		}
		if len(inContract) < 15 {
			t.Fatalf("%s: the table under Error codes has %d codes: did its format change?", contractFile, len(inContract))
		}
		var enum []string
		for _, v := range asSlice(sp.at("/components/schemas/ErrorCode/enum")) {
			enum = append(enum, v.(string))
		}
		codes := errorCodes(t)
		for c := range inContract {
			if !slices.Contains(codes, c) {
				t.Errorf("%s is in the error table of %s but not a code of errors.go", c, contractFile)
			}
			if !slices.Contains(enum, c) {
				t.Errorf("%s is in the error table of %s but not in the ErrorCode enum of %s", c, contractFile, specFile)
			}
		}
		for _, c := range codes {
			if _, ok := inContract[c]; !ok {
				t.Errorf("%s is a code of errors.go but not in the error table of %s", c, contractFile)
			}
		}
		for _, c := range enum {
			if _, ok := inContract[c]; !ok {
				t.Errorf("%s is in the ErrorCode enum of %s but not in the error table of %s", c, specFile, contractFile)
			}
		}
	})
}
