package deploy_test

import (
	"bufio"
	"fmt"
	"go/version"
	"os"
	"strings"
	"testing"
)

// goModRequires returns the Go version go.mod asks for, as a go/version
// string ("go1.26.8"): the later of its go line and its toolchain line.
func goModRequires(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var goLine, toolchain string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(line)
		if len(fields) != 2 {
			continue
		}
		switch fields[0] {
		case "go":
			goLine = "go" + fields[1]
		case "toolchain":
			// "go1.27.1", or with a suffix: "go1.27.1+auto", "go1.27.1-custom";
			// "default" names no version and is left out below.
			toolchain, _, _ = strings.Cut(fields[1], "+")
			toolchain, _, _ = strings.Cut(toolchain, "-")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !version.IsValid(goLine) {
		t.Fatalf("%s: go line %q is not a Go version", path, goLine)
	}
	if version.IsValid(toolchain) && version.Compare(toolchain, goLine) > 0 {
		return toolchain
	}
	return goLine
}

// imageGoVersion returns the Go version of a golang image reference, as a
// go/version string: "golang:1.26.8-alpine3.22@sha256:…" is go1.26.8, and
// "golang:1.26" is go1.26, the language version, which go/version orders
// before every release of it (a floating tag promises no patch level).
func imageGoVersion(ref string) (string, error) {
	ref, _, _ = strings.Cut(ref, "@") // a digest
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon < slash+1 {
		return "", fmt.Errorf("image %q has no tag: pin a Go version", ref)
	}
	if name := ref[slash+1 : colon]; name != "golang" {
		return "", fmt.Errorf("image %q is not a golang image", ref)
	}
	tag := ref[colon+1:]
	v, _, _ := strings.Cut(tag, "-") // 1.26.8-alpine3.22, 1.26.8-bookworm
	if !version.IsValid("go" + v) {
		return "", fmt.Errorf("image %q: tag %q names no Go version (latest, alpine, …): pin one", ref, tag)
	}
	return "go" + v, nil
}

// builderImage returns the image reference of the Dockerfile's build
// stage, its FROM line without flags (--platform=…) or stage name.
func builderImage(t *testing.T) string {
	t.Helper()
	for _, f := range strings.Fields(readDockerfile(t)[0][0].args) {
		if !strings.HasPrefix(f, "--") {
			return f
		}
	}
	t.Fatal("the first FROM names no image")
	return ""
}

// TestDockerGoVersion: the builder image's Go is at least what go.mod
// requires. The golang images set GOTOOLCHAIN=local, so an older one does
// not download the newer toolchain: `go build` stops with "go.mod requires
// go >= …".
func TestDockerGoVersion(t *testing.T) {
	want := goModRequires(t, "../go.mod")
	ref := builderImage(t)
	got, err := imageGoVersion(ref)
	if err != nil {
		t.Fatalf("Dockerfile build stage: %v", err)
	}
	if version.Compare(got, want) < 0 {
		t.Errorf("Dockerfile builds with %s (%s), older than the %s go.mod requires: use golang:%s or later",
			ref, got, want, strings.TrimPrefix(want, "go"))
	}
}

func TestImageGoVersion(t *testing.T) {
	for _, tc := range []struct {
		ref, want string
	}{
		{"golang:1.26.8", "go1.26.8"},
		{"golang:1.26.8-alpine3.22", "go1.26.8"},
		{"golang:1.26.10-bookworm@sha256:0123abcd", "go1.26.10"},
		{"docker.io/library/golang:1.27.0", "go1.27.0"},
		{"mirror.example:5000/library/golang:1.26.9", "go1.26.9"},
		{"golang:1.26", "go1.26"},
		{"golang:1.27rc1", "go1.27rc1"},
		{"golang", ""},
		{"golang:latest", ""},
		{"golang:alpine", ""},
		{"mirror.example:5000/golang", ""},
		{"alpine:3.22", ""},
	} {
		got, err := imageGoVersion(tc.ref)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("imageGoVersion(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
	// The order that decides: a floating minor tag is older than any
	// patch release, and versions compare as numbers, not strings.
	for _, tc := range [][2]string{
		{"go1.26", "go1.26.8"},
		{"go1.26.8", "go1.26.10"},
		{"go1.26.9", "go1.27rc1"},
		{"go1.27rc1", "go1.27.0"},
		{"go1.9.9", "go1.26.0"},
	} {
		if version.Compare(tc[0], tc[1]) >= 0 {
			t.Errorf("%s is not older than %s", tc[0], tc[1])
		}
	}
}

func TestGoModRequires(t *testing.T) {
	for _, tc := range []struct {
		mod, want string
	}{
		{"module m\n\ngo 1.26.8\n", "go1.26.8"},
		{"module m\ngo 1.26\n", "go1.26"},
		{"module m\ngo 1.26.8\ntoolchain go1.27.1\n", "go1.27.1"},
		{"module m\ngo 1.26.8 // a comment\ntoolchain go1.26.10+auto\n", "go1.26.10"},
		{"module m\ngo 1.27.0\ntoolchain go1.26.8\n", "go1.27.0"},
		{"module m\ngo 1.26.8\ntoolchain default\n", "go1.26.8"},
	} {
		path := t.TempDir() + "/go.mod"
		if err := os.WriteFile(path, []byte(tc.mod), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := goModRequires(t, path); got != tc.want {
			t.Errorf("go.mod %q requires %s, want %s", tc.mod, got, tc.want)
		}
	}
}
