package leafdv1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// generated are the files protoc writes from leafd.proto, with the
// plugin that writes each.
var generated = []struct{ file, plugin string }{
	{"leafd.pb.go", "protoc-gen-go"},
	{"leafd_grpc.pb.go", "protoc-gen-go-grpc"},
}

// The committed code is what protoc and the plugins make of leafd.proto
// today, byte for byte: regenerated into a temporary directory with the
// go:generate command of generate.go and compared. Without protoc or a
// plugin, or with other versions than those that made the committed files,
// the test is skipped, unless LEAFD_TEST_REQUIRE_PROTOC=1 (as in CI), when
// it fails.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	require := os.Getenv("LEAFD_TEST_REQUIRE_PROTOC") == "1"
	unavailable := func(format string, args ...any) {
		t.Helper()
		if require {
			t.Fatalf(format+" (LEAFD_TEST_REQUIRE_PROTOC=1)", args...)
		}
		t.Skipf(format, args...)
	}
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		unavailable("protoc is not installed: apt-get install protobuf-compiler")
	}
	plugins := map[string]string{}
	for _, g := range generated {
		path, err := lookPlugin(g.plugin)
		if err != nil {
			unavailable("%s is not installed: %s", g.plugin, installHint(t, g.file, g.plugin))
		}
		plugins[g.plugin] = path
	}
	// The versions the committed files name must be those installed, or
	// the headers alone would differ.
	for _, g := range generated {
		committed, err := os.ReadFile(g.file)
		if err != nil {
			t.Fatal(err)
		}
		wantPlugin, wantProtoc := headerVersions(committed)
		if wantPlugin == "" || wantProtoc == "" {
			t.Fatalf("%s names no plugin and protoc versions in its header", g.file)
		}
		if got := toolVersion(t, plugins[g.plugin], "--version"); got != wantPlugin {
			unavailable("%s is %s, but %s was made by %s: %s", g.plugin, got, g.file, wantPlugin, installHint(t, g.file, g.plugin))
		}
		if got := toolVersion(t, protoc, "--version"); got != wantProtoc {
			unavailable("protoc is %s, but %s was made by %s", got, g.file, wantProtoc)
		}
	}

	out := t.TempDir()
	cmd := exec.Command(protoc, "--proto_path=../..",
		"--plugin=protoc-gen-go="+plugins["protoc-gen-go"],
		"--plugin=protoc-gen-go-grpc="+plugins["protoc-gen-go-grpc"],
		"--go_out="+out, "--go_opt=paths=source_relative",
		"--go-grpc_out="+out, "--go-grpc_opt=paths=source_relative",
		"leafd/v1/leafd.proto")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	for _, g := range generated {
		want, err := os.ReadFile(filepath.Join(out, "leafd", "v1", g.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(g.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what protoc generates from leafd.proto (first difference at line %d): run go generate ./proto/... and commit the result",
				g.file, firstDifference(got, want))
		}
	}
}

// lookPlugin finds a protoc plugin in PATH, or where go install puts it.
func lookPlugin(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	for _, dir := range goBinDirs() {
		p := filepath.Join(dir, name)
		if fi, statErr := os.Stat(p); statErr == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", err
}

// goBinDirs are the directories go install writes to: GOBIN, or the bin of
// each GOPATH entry.
func goBinDirs() []string {
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var dirs []string
	if len(lines) > 0 && strings.TrimSpace(lines[0]) != "" {
		dirs = append(dirs, strings.TrimSpace(lines[0]))
	}
	if len(lines) > 1 {
		for _, p := range filepath.SplitList(strings.TrimSpace(lines[1])) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	return dirs
}

var (
	// "// 	protoc-gen-go v1.36.12" and "// - protoc-gen-go-grpc v1.6.2"
	pluginLine = regexp.MustCompile(`(?m)^//\s+(?:-\s+)?protoc-gen-go(?:-grpc)?\s+(v\S+)$`)
	protocLine = regexp.MustCompile(`(?m)^//\s+(?:-\s+)?protoc\s+(v\S+)$`)
	versionRe  = regexp.MustCompile(`\d+\.\d+\.\d+\S*`)
)

// headerVersions returns the plugin and protoc versions a generated file's
// header names.
func headerVersions(b []byte) (plugin, protoc string) {
	if m := pluginLine.FindSubmatch(b); m != nil {
		plugin = string(m[1])
	}
	if m := protocLine.FindSubmatch(b); m != nil {
		protoc = string(m[1])
	}
	return plugin, protoc
}

// toolVersion runs a tool's version flag and returns its version as the
// headers write it: "v1.36.12" for "protoc-gen-go v1.36.12", "v3.21.12"
// for "libprotoc 3.21.12".
func toolVersion(t *testing.T, path string, flag string) string {
	t.Helper()
	out, err := exec.Command(path, flag).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", path, flag, err, out)
	}
	v := versionRe.FindString(string(out))
	if v == "" {
		t.Fatalf("%s %s printed no version: %q", path, flag, out)
	}
	return "v" + v
}

// installHint says how to install the plugin at the version that made file.
func installHint(t *testing.T, file, plugin string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := headerVersions(b)
	module := "google.golang.org/protobuf/cmd/protoc-gen-go"
	if plugin == "protoc-gen-go-grpc" {
		module = "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	}
	return "go install " + module + "@" + v
}

// firstDifference returns the first line (from 1) on which a and b differ.
func firstDifference(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}
