package deploy_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, USER, …
	args string
}

// readDockerfile splits ../Dockerfile into its stages' instructions. No
// Docker engine runs here, so the image is not built: this checks what the
// file says.
func readDockerfile(t *testing.T) [][]instruction {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var (
		stages [][]instruction
		line   string
	)
	for _, l := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(l)
		if line == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if strings.HasSuffix(trimmed, "\\") {
			line += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		line += trimmed
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		line = ""
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s before the first FROM", in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	return stages
}

func find(stage []instruction, cmd string) []string {
	var out []string
	for _, in := range stage {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// TestDockerfile checks the image's recipe against the list of issue 8:
// multi-stage, a static binary (cgo off), a small final image, a non-root
// user given by number, a HEALTHCHECK on /healthz at the port leafd
// listens on, configuration through LEAFD_* variables and no config file.
func TestDockerfile(t *testing.T) {
	stages := readDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stage(s): want a build stage and a small final one", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if !regexp.MustCompile(`golang:1\.\d+`).MatchString(build[0].args) {
		t.Errorf("build stage FROM %q, want a golang image", build[0].args)
	}
	var built bool
	for _, run := range find(build, "RUN") {
		if strings.Contains(run, "go build") {
			built = true
			if !strings.Contains(run, "CGO_ENABLED=0") {
				t.Errorf("go build without CGO_ENABLED=0: %q", run)
			}
			if !strings.Contains(run, "./cmd/leafd") {
				t.Errorf("go build of something else than ./cmd/leafd: %q", run)
			}
		}
	}
	if !built {
		t.Error("the build stage runs no go build")
	}

	base := final[0].args
	if !regexp.MustCompile(`^(alpine|gcr\.io/distroless/static|scratch|busybox)\b`).MatchString(base) {
		t.Errorf("final stage FROM %q, want a small base (alpine, distroless static, scratch)", base)
	}
	for _, copy := range find(final, "COPY") {
		if strings.Contains(copy, "config.yaml") {
			t.Errorf("the image copies a config file (%q): it would seed the demo tag into production databases", copy)
		}
	}
	users := find(final, "USER")
	if len(users) == 0 {
		t.Fatal("the final stage sets no USER: leafd would run as root")
	}
	user := users[len(users)-1]
	uid, _, _ := strings.Cut(user, ":")
	if !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(uid) {
		t.Errorf("USER %q: give a numeric non-zero uid, so that Kubernetes' runAsNonRoot can verify it", user)
	}

	envs := strings.Join(find(final, "ENV"), " ")
	addr := regexp.MustCompile(`LEAFD_HTTP_ADDR=(\S+)`).FindStringSubmatch(envs)
	if addr == nil {
		t.Fatal("no ENV LEAFD_HTTP_ADDR: the built-in default, 127.0.0.1:8080, is unreachable from outside the container")
	}
	port := strings.Trim(addr[1][strings.LastIndex(addr[1], ":")+1:], `"`)
	if !strings.HasPrefix(strings.Trim(addr[1], `"`), "0.0.0.0:") && !strings.HasPrefix(strings.Trim(addr[1], `"`), ":") {
		t.Errorf("LEAFD_HTTP_ADDR=%s does not listen on every interface", addr[1])
	}
	if exposed := find(final, "EXPOSE"); len(exposed) != 1 || exposed[0] != port {
		t.Errorf("EXPOSE %v, want %s, the port of LEAFD_HTTP_ADDR", exposed, port)
	}
	hcs := find(final, "HEALTHCHECK")
	if len(hcs) != 1 || !strings.Contains(hcs[0], "http://127.0.0.1:"+port+"/healthz") {
		t.Errorf("HEALTHCHECK %v, want a probe of http://127.0.0.1:%s/healthz", hcs, port)
	}
	entry := find(final, "ENTRYPOINT")
	if len(entry) != 1 || !strings.Contains(entry[0], "leafd") {
		t.Errorf("ENTRYPOINT %v, want the leafd binary", entry)
	}
	if cmd := find(final, "CMD"); len(cmd) != 1 || !strings.Contains(cmd[0], `"serve"`) {
		t.Errorf("CMD %v, want [\"serve\"]", cmd)
	}
}
