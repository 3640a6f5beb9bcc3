package deploy_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/go-sql-driver/mysql"
	"go.yaml.in/yaml/v3"

	"github.com/leafd/leafd/internal/config"
)

const composeFile = "../docker-compose.yml"

// loadProject loads docker-compose.yml as `docker compose` does, with the
// Compose specification's own loader: schema validation, interpolation
// with env (and nothing from this machine's environment), normalization,
// and the consistency checks (every named volume declared, every
// depends_on a service).
func loadProject(t *testing.T, env ...string) *types.Project {
	t.Helper()
	return loadProjectWith(t, cli.WithEnv(env))
}

// loadProjectWith loads docker-compose.yml as loadProject does, with the
// environment the options give (cli.WithEnv, an env file).
func loadProjectWith(t *testing.T, env ...cli.ProjectOptionsFn) *types.Project {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{composeFile}, append(append([]cli.ProjectOptionsFn{
		cli.WithWorkingDirectory(root)}, env...),
		cli.WithInterpolation(true),
		cli.WithNormalization(true),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := cli.ProjectFromOptions(ctx, opts)
	if err != nil {
		t.Fatalf("%s does not load: %v", composeFile, err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("service %s: %v", name, err)
	}
	return s
}

// env returns a service's environment as plain strings; a variable
// declared without a value fails the test.
func env(t *testing.T, s types.ServiceConfig) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for k, v := range s.Environment {
		if v == nil {
			t.Fatalf("service %s: %s has no value", s.Name, k)
		}
		out[k] = *v
	}
	return out
}

// leafdServices are the services that run the leafd image.
var leafdServices = []string{"migrate", "leafd1", "leafd2"}

func TestComposeServices(t *testing.T) {
	p := loadProject(t)
	if p.Name != "leafd" {
		t.Errorf("project name %q, want leafd", p.Name)
	}
	if got, want := p.ServiceNames(), []string{"leafd1", "leafd2", "migrate", "mysql"}; !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	root, _ := filepath.Abs("..")
	for _, name := range leafdServices {
		s := service(t, p, name)
		if s.Build == nil || s.Build.Context != root {
			t.Errorf("%s: build %+v, want the repository root %s (the Dockerfile)", name, s.Build, root)
		}
		if s.Image != "leafd:local" {
			t.Errorf("%s: image %q, want leafd:local, one image for all three", name, s.Image)
		}
	}
}

func TestComposeMySQL(t *testing.T) {
	p := loadProject(t)
	s := service(t, p, "mysql")
	if !strings.HasPrefix(s.Image, "mysql:8") {
		t.Errorf("mysql image %q, want mysql:8.x", s.Image)
	}
	e := env(t, s)
	if e["MYSQL_DATABASE"] != "leaf" || e["MYSQL_ROOT_PASSWORD"] != "leafd-local-only" {
		t.Errorf("mysql environment %v, want MYSQL_DATABASE=leaf and the default root password", e)
	}
	hc := s.HealthCheck
	if hc == nil || hc.Disable || len(hc.Test) < 2 || hc.Test[0] != "CMD-SHELL" || !strings.Contains(hc.Test[1], "mysqladmin ping") || !strings.Contains(hc.Test[1], "-h 127.0.0.1") {
		t.Fatalf("mysql health check %+v, want mysqladmin ping over TCP", hc)
	}
	if hc.Interval == nil || hc.Retries == nil || *hc.Retries < 1 || hc.StartPeriod == nil {
		t.Errorf("mysql health check without interval, retries or start period: %+v", hc)
	}
	// The data lives in the named volume, declared at the top level.
	i := slices.IndexFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == "/var/lib/mysql" })
	if i < 0 || s.Volumes[i].Type != types.VolumeTypeVolume || s.Volumes[i].Source != "mysql-data" {
		t.Fatalf("mysql volumes %+v, want the named volume mysql-data on /var/lib/mysql", s.Volumes)
	}
	if _, ok := p.Volumes["mysql-data"]; !ok || len(p.Volumes) != 1 {
		t.Errorf("top-level volumes %v, want mysql-data alone", p.VolumeNames())
	}
	if len(s.Ports) != 0 {
		t.Errorf("mysql publishes %+v: the database should stay inside the project's network", s.Ports)
	}
}

func TestComposeMigrate(t *testing.T) {
	p := loadProject(t)
	s := service(t, p, "migrate")
	if !slices.Equal(s.Command, types.ShellCommand{"migrate"}) {
		t.Errorf("migrate command %q, want [migrate] (leafd migrate)", s.Command)
	}
	if s.Restart != types.RestartPolicyNo {
		t.Errorf("migrate restart %q, want no: a one-shot step must not loop", s.Restart)
	}
	if d, ok := s.DependsOn["mysql"]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("migrate depends_on %+v, want mysql service_healthy", s.DependsOn)
	}
	if len(s.Ports) != 0 {
		t.Errorf("migrate publishes ports %+v", s.Ports)
	}
	if s.HealthCheck == nil || !s.HealthCheck.Disable {
		t.Errorf("migrate health check %+v, want the image's (a probe of a server) disabled", s.HealthCheck)
	}
}

func TestComposeServers(t *testing.T) {
	p := loadProject(t)
	mysqlEnv := env(t, service(t, p, "mysql"))
	published := map[string]string{}
	for _, name := range []string{"leafd1", "leafd2"} {
		t.Run(name, func(t *testing.T) {
			s := service(t, p, name)
			for dep, cond := range map[string]string{
				"mysql":   types.ServiceConditionHealthy,
				"migrate": types.ServiceConditionCompletedSuccessfully,
			} {
				if d, ok := s.DependsOn[dep]; !ok || d.Condition != cond {
					t.Errorf("depends_on %s: %+v, want condition %s", dep, s.DependsOn[dep], cond)
				}
			}
			if s.Restart != types.RestartPolicyUnlessStopped {
				t.Errorf("restart %q, want unless-stopped", s.Restart)
			}
			e := env(t, s)
			if e["LEAFD_STORE_DRIVER"] != "mysql" {
				t.Errorf("LEAFD_STORE_DRIVER %q, want mysql", e["LEAFD_STORE_DRIVER"])
			}
			checkDSN(t, e["LEAFD_STORE_DSN"], mysqlEnv)
			if e["LEAFD_STORE_MIGRATE"] != "false" {
				t.Errorf("LEAFD_STORE_MIGRATE %q, want false: the migrate service does it", e["LEAFD_STORE_MIGRATE"])
			}
			port := listenPort(t, e["LEAFD_HTTP_ADDR"])

			if len(s.Ports) != 1 || s.Ports[0].Target != port || s.Ports[0].Protocol != "tcp" {
				t.Fatalf("ports %+v, want one mapping to the container's port %d", s.Ports, port)
			}
			// Published on loopback only: an empty host_ip is every
			// interface, and the ID routes, the dashboard and /api/state
			// need no token.
			if ip := s.Ports[0].HostIP; ip != "127.0.0.1" {
				t.Errorf("port %s published on host address %q, want 127.0.0.1 (every interface only deliberately)", s.Ports[0].Published, ip)
			}
			pub := s.Ports[0].Published
			if prev, dup := published[pub]; dup {
				t.Errorf("host port %s published by %s and %s", pub, prev, name)
			}
			published[pub] = name

			hc := s.HealthCheck
			if hc == nil || hc.Disable || len(hc.Test) < 2 || hc.Test[0] != "CMD" {
				t.Fatalf("health check %+v, want a CMD probe", hc)
			}
			probe := hc.Test[len(hc.Test)-1]
			u, err := url.Parse(probe)
			if err != nil || u.Hostname() != "127.0.0.1" || u.Port() != strconv.Itoa(int(port)) || (u.Path != "/readyz" && u.Path != "/healthz") {
				t.Errorf("health check probes %q, want http://127.0.0.1:%d/readyz or /healthz", probe, port)
			}
			if hc.Interval == nil || hc.Timeout == nil || hc.Retries == nil {
				t.Errorf("health check without interval, timeout or retries: %+v", hc)
			}
		})
	}
	if len(published) != 2 || published["8081"] != "leafd1" || published["8082"] != "leafd2" {
		t.Errorf("published ports %v, want 8081 for leafd1 and 8082 for leafd2 (the README's)", published)
	}
}

// TestComposeInterpolation: a password from the environment reaches the
// database and both DSNs alike.
func TestComposeInterpolation(t *testing.T) {
	p := loadProject(t, "MYSQL_ROOT_PASSWORD=s3cret")
	mysqlEnv := env(t, service(t, p, "mysql"))
	if mysqlEnv["MYSQL_ROOT_PASSWORD"] != "s3cret" {
		t.Fatalf("mysql root password %q, want s3cret from the environment", mysqlEnv["MYSQL_ROOT_PASSWORD"])
	}
	for _, name := range leafdServices {
		checkDSN(t, env(t, service(t, p, name))["LEAFD_STORE_DSN"], mysqlEnv)
	}
}

// TestComposeLeafdConfig: the environment each leafd service gets is
// accepted by leafd's own configuration loader, names only keys leafd
// has, and means what the file says.
func TestComposeLeafdConfig(t *testing.T) {
	keys := configKeys(t)
	p := loadProject(t)
	for _, name := range leafdServices {
		t.Run(name, func(t *testing.T) {
			e := env(t, service(t, p, name))
			for k := range e {
				if !keys[k] {
					t.Errorf("%s is not a leafd setting (a typo is ignored silently, not refused)", k)
				}
			}
			cfg, err := loadLeafdConfig(t, e)
			if err != nil {
				t.Fatalf("leafd refuses the environment of %s: %v", name, err)
			}
			if cfg.Store.Driver != "mysql" || cfg.Store.DSN != e["LEAFD_STORE_DSN"] {
				t.Errorf("store %+v, want mysql with the DSN", cfg.Store)
			}
			if name == "migrate" {
				return
			}
			if cfg.Store.Migrate {
				t.Error("store.migrate is on")
			}
			if host, _, _ := net.SplitHostPort(cfg.HTTP.Addr); host != "0.0.0.0" && host != "" {
				t.Errorf("http.addr %q does not listen on every interface: the published port would reach nothing", cfg.HTTP.Addr)
			}
			if len(cfg.Segment.SeedTags) != 1 || cfg.Segment.SeedTags[0].Tag != "demo" || cfg.Segment.SeedTags[0].Step != 1000 {
				t.Errorf("seed tags %+v, want demo:1000 (the README's curl)", cfg.Segment.SeedTags)
			}
		})
	}
}

// loadLeafdConfig loads leafd's configuration as the image does: from a
// directory without config.yaml, with the image's ENV (imageEnv)
// overridden by the environment e, and nothing else of leafd's. It
// changes the test's environment, so the test may not be parallel.
func loadLeafdConfig(t *testing.T, e map[string]string) (*config.Config, error) {
	t.Helper()
	return loadConfigEnv(t, "", withImageEnv(t, e))
}

// loadConfigEnv loads leafd's configuration from the file path (none if
// empty) in an empty directory, with the environment e and no other
// variable of leafd's: neither this machine's nor the image's. It leaves
// the directory as it was, and the environment so until the test ends.
func loadConfigEnv(t *testing.T, path string, e map[string]string) (*config.Config, error) {
	t.Helper()
	back, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // which also refuses a parallel test
	defer func() {
		if err := os.Chdir(back); err != nil { // the test reads files relative to deploy/
			t.Fatal(err)
		}
	}()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LEAFD_") {
			t.Setenv(k, "") // empty counts as unset
		}
	}
	for k, v := range e {
		t.Setenv(k, v)
	}
	return config.Load(path)
}

// withImageEnv returns the environment of a container of the image whose
// own environment is e: the image's ENV, each variable of e replacing it.
func withImageEnv(t *testing.T, e map[string]string) map[string]string {
	t.Helper()
	env := imageEnv(t)
	for k, v := range e {
		env[k] = v
	}
	return env
}

// imageEnv returns the variables the final stage of ../Dockerfile sets
// with ENV, in both of its forms (ENV K=V K2="V 2", and ENV K V).
func imageEnv(t *testing.T) map[string]string {
	t.Helper()
	stages := readDockerfile(t)
	env := map[string]string{}
	for _, args := range find(stages[len(stages)-1], "ENV") {
		k, rest, _ := strings.Cut(args, " ")
		if !strings.Contains(k, "=") { // ENV K V: the rest of the line is the value
			env[k] = strings.TrimSpace(rest)
			continue
		}
		words, err := dockerWords(args)
		if err != nil {
			t.Fatalf("Dockerfile ENV %s: %v", args, err)
		}
		for _, w := range words {
			k, v, ok := strings.Cut(w, "=")
			if !ok || k == "" {
				t.Fatalf("Dockerfile ENV %s: %q is not NAME=value", args, w)
			}
			env[k] = v
		}
	}
	if len(env) == 0 {
		t.Fatal("the Dockerfile's final stage sets no ENV: not the file this parser was written for?")
	}
	return env
}

// dockerWords splits s into words at unquoted blanks, as the Dockerfile
// does for ENV: double and single quotes group, and a backslash outside
// single quotes escapes the next character.
func dockerWords(s string) ([]string, error) {
	var (
		words []string
		word  strings.Builder
		in    bool // a word has begun
		quote rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\\' && quote != '\'':
			if i+1 == len(rs) {
				return nil, fmt.Errorf("a backslash at the end")
			}
			i++
			word.WriteRune(rs[i])
			in = true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, word.String())
				word.Reset()
				in = false
			}
		default:
			word.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("an unclosed %c", quote)
	}
	if in {
		words = append(words, word.String())
	}
	return words, nil
}

// configKeys returns the LEAFD_* names of every key of the shipped
// config.yaml, which holds every key leafd has (docs/contract.md section 7).
func configKeys(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := make(map[string]bool)
	for section, fields := range m {
		for field := range fields {
			keys[config.EnvName(section+"."+field)] = true
		}
	}
	if !keys["LEAFD_STORE_DSN"] || len(keys) < 25 {
		t.Fatalf("config.yaml yields %d keys: not the shipped configuration?", len(keys))
	}
	return keys
}

// checkDSN checks that a leafd DSN reaches the mysql service's database as
// its root user.
func checkDSN(t *testing.T, dsn string, mysqlEnv map[string]string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("LEAFD_STORE_DSN %q does not parse: %v", dsn, err)
	}
	if cfg.Net != "tcp" || cfg.Addr != "mysql:3306" {
		t.Errorf("DSN %q reaches %s %s, want tcp mysql:3306 (the mysql service)", dsn, cfg.Net, cfg.Addr)
	}
	if cfg.DBName != mysqlEnv["MYSQL_DATABASE"] {
		t.Errorf("DSN database %q, want %q, the one MySQL creates", cfg.DBName, mysqlEnv["MYSQL_DATABASE"])
	}
	if cfg.User != "root" || cfg.Passwd != mysqlEnv["MYSQL_ROOT_PASSWORD"] {
		t.Errorf("DSN user %q with password %q, want root with MYSQL_ROOT_PASSWORD %q", cfg.User, cfg.Passwd, mysqlEnv["MYSQL_ROOT_PASSWORD"])
	}
	if !cfg.ParseTime {
		t.Errorf("DSN %q without parseTime=true", dsn)
	}
}

func listenPort(t *testing.T, addr string) uint32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	n, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || perr != nil || n == 0 {
		t.Fatalf("LEAFD_HTTP_ADDR %q is not host:port", addr)
	}
	return uint32(n)
}
