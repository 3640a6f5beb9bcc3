package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// shippedDifferences are the keys whose value in the shipped config.yaml is
// not the built-in default, on purpose.
var shippedDifferences = map[string]bool{
	"segment.seed_tags": true, // the demo tag, which a production database must not get by accident
}

// withValue returns the defaults with f set to raw, and the problems of
// decoding it.
func withValue(f field, raw any) (*Config, []*KeyError) {
	c := Default()
	return c, f.set(c, raw)
}

// TestDocumentedKeys holds the table of docs/configuration.md to the
// declarations: every key documented once, with its environment variable
// and its default.
func TestDocumentedKeys(t *testing.T) {
	data, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+\\.[a-z_]+)` \\| ([^|]*) \\| ([^|]*) \\|")
	rows := make(map[string][][]string) // key → its rows' environment and default cells
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		rows[m[1]] = append(rows[m[1]], m[2:])
	}
	declared := make(map[string]bool)
	for _, f := range fields() {
		declared[f.key] = true
		if len(rows[f.key]) != 1 {
			t.Errorf("%s has %d rows in the table of docs/configuration.md, want one", f.key, len(rows[f.key]))
			continue
		}
		r := rows[f.key][0]
		if env := strings.Fields(r[0]); len(env) == 0 || env[0] != "`"+EnvName(f.key)+"`" {
			t.Errorf("%s: environment variable %q in docs/configuration.md, want `%s`", f.key, r[0], EnvName(f.key))
		}
		// The default is the first value in backquotes, or "empty" or
		// "none" for an empty one.
		var raw any
		if cell := strings.TrimSpace(r[1]); !strings.HasPrefix(cell, "empty") && !strings.HasPrefix(cell, "none") {
			_, value, _ := strings.Cut(cell, "`")
			value, _, _ = strings.Cut(value, "`")
			if err := yaml.Unmarshal([]byte(value), &raw); err != nil {
				t.Errorf("%s: default %q in docs/configuration.md: %v", f.key, cell, err)
				continue
			}
		}
		if c, ps := withValue(f, raw); len(ps) > 0 || !reflect.DeepEqual(c, Default()) {
			t.Errorf("%s: default %q in docs/configuration.md is not the built-in default %v (%v)", f.key, r[1], f.def, toErrors(ps))
		}
	}
	for key := range rows {
		if !declared[key] {
			t.Errorf("docs/configuration.md documents %s, which is no key", key)
		}
	}
}

// TestShippedConfigHoldsTheDefaults holds config.yaml's values, and those
// of the defaults in docs/contract.md section 7, to the built-in defaults,
// but for shippedDifferences in config.yaml.
func TestShippedConfigHoldsTheDefaults(t *testing.T) {
	shipped := readYAML(t, "../../config.yaml", "")
	for key := range shippedDifferences {
		section, name, _ := strings.Cut(key, ".")
		if _, ok := shipped[section][name]; !ok {
			t.Errorf("config.yaml lacks %s, which it sets apart from the defaults", key)
		}
	}
	checkDefaults(t, "config.yaml", shipped, shippedDifferences)
	checkDefaults(t, "docs/contract.md", readYAML(t, "../../docs/contract.md", "The built-in defaults:\n\n```yaml\n"), nil)
}

// readYAML reads the YAML of file, or of its block that follows after.
func readYAML(t *testing.T, file, after string) map[string]map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if after != "" {
		_, block, ok := strings.Cut(string(data), after)
		block, _, _ = strings.Cut(block, "```")
		if !ok {
			t.Fatalf("%s has no %q", file, after)
		}
		data = []byte(block)
	}
	var doc map[string]map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return doc
}

// checkDefaults reports each key of doc whose value is not its default,
// but for those of except.
func checkDefaults(t *testing.T, name string, doc map[string]map[string]any, except map[string]bool) {
	t.Helper()
	for _, f := range fields() {
		section, key, _ := strings.Cut(f.key, ".")
		raw, ok := doc[section][key]
		if !ok || except[f.key] {
			continue
		}
		if c, ps := withValue(f, raw); len(ps) > 0 || !reflect.DeepEqual(c, Default()) {
			t.Errorf("%s: %s: %v is not the built-in default %v (%v)", name, f.key, raw, f.def, toErrors(ps))
		}
	}
}
