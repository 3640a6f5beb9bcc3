package deploy_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"go/build"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/config"
	"github.com/leafd/leafd/segment"
	"go.yaml.in/yaml/v3"
)

const (
	chartDir = "helm/leafd"
	// The plain manifests and the values they are rendered with.
	manifestsFile  = "kubernetes/leafd.yaml"
	manifestValues = "kubernetes/values.yaml"
	// The Kubernetes version the chart is rendered for: the schemas' (kubernetesModule).
	kubeVersion = "1.37.2"
	// requireHelm makes a missing helm, or a schema module the proxy cannot
	// serve, a failure instead of a skip.
	requireHelm = "LEAFD_TEST_REQUIRE_HELM"
)

// manifestsHeader opens deploy/kubernetes/leafd.yaml, before helm's output.
const manifestsHeader = `# leafd on Kubernetes: the Helm chart deploy/helm/leafd rendered with
# deploy/kubernetes/values.yaml (three replicas over MySQL, gRPC on), by
# helm template leafd deploy/helm/leafd -f deploy/kubernetes/values.yaml
# --kube-version ` + kubeVersion + `. Do not edit: change the chart or the values,
# then render it again with
#
#   LEAFD_TEST_UPDATE_MANIFESTS=1 go test -run TestHelmManifestsInSync ./deploy/
#
# It expects a Secret named leafd with the key dsn (a MySQL DSN, such as
# leafd:secret@tcp(db:3306)/leaf?parseTime=true) and optionally admin-token,
# opaque-key, fallback-dsns and migrate-dsn. See docs/deployment.md#kubernetes.
`

// missing skips the test for want of a tool, or fails it under
// LEAFD_TEST_REQUIRE_HELM=1.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv(requireHelm) == "1" {
		t.Fatalf("%s (%s=1): go install helm.sh/helm/v3/cmd/helm@v3.22.0, and let the Go module proxy serve %s and %s", why, requireHelm, kubernetesModule, promOperatorModule)
	}
	t.Skipf("%s; set %s=1 to fail instead", why, requireHelm)
}

// helmPath returns the first Helm 3 on PATH or in go install's directory
// (findHelm), or skips the test without one (missing). A Helm 4 is passed
// over: the committed manifests hold Helm 3's output.
func helmPath(t *testing.T) string {
	t.Helper()
	p, why := foundHelm()
	if p == "" {
		missing(t, why)
	}
	return p
}

// foundHelm is findHelm over PATH and go install's directory, once.
var foundHelm = sync.OnceValues(func() (string, string) {
	dirs := filepath.SplitList(os.Getenv("PATH"))
	gobin, gopath := os.Getenv("GOBIN"), build.Default.GOPATH
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		if l := strings.Split(string(out), "\n"); len(l) >= 2 {
			gobin, gopath = l[0], l[1]
		}
	}
	if gobin == "" {
		gobin = filepath.Join(gopath, "bin")
	}
	return findHelm(append(dirs, gobin))
})

// findHelm returns the path of the first helm in dirs that is Helm 3, or
// why there is none.
func findHelm(dirs []string) (path, why string) {
	var others []string
	for _, d := range dirs {
		p := filepath.Join(d, "helm")
		if fi, err := os.Stat(p); d == "" || err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			continue
		}
		out, err := exec.Command(p, "version", "--template", "{{.Version}}").Output()
		v := strings.TrimSpace(string(out))
		if err == nil && strings.HasPrefix(v, "v3.") {
			return p, ""
		}
		if err != nil {
			v = err.Error()
		}
		others = append(others, p+" is "+v)
	}
	if len(others) > 0 {
		return "", "no Helm 3 (" + strings.Join(others, "; ") + ")"
	}
	return "", "no helm on PATH or in " + dirs[len(dirs)-1]
}

// TestHelmVersion: the helm the tests run is Helm 3, whose output the
// committed manifests hold; a Helm 4 found first is passed over, and one
// found alone skips the tests (unless LEAFD_TEST_REQUIRE_HELM=1).
func TestHelmVersion(t *testing.T) {
	fake := func(version string) string {
		dir := t.TempDir()
		script := "#!/bin/sh\nprintf %s " + version + "\n"
		if err := os.WriteFile(filepath.Join(dir, "helm"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	v4, v3, none := fake("v4.0.1"), fake("v3.22.0"), t.TempDir()
	if p, why := findHelm([]string{none, v4, v3}); p != filepath.Join(v3, "helm") {
		t.Errorf("a Helm 4 on PATH, a Helm 3 after it: found %q (%s), want the Helm 3", p, why)
	}
	p, why := findHelm([]string{v4, none})
	if p != "" || !strings.Contains(why, "v4.0.1") {
		t.Errorf("only a Helm 4: found %q (%s), want none and the reason", p, why)
	}
	var sub *testing.T
	t.Run("only a Helm 4", func(t *testing.T) {
		sub = t
		t.Setenv(requireHelm, "")
		missing(t, why)
	})
	if !sub.Skipped() {
		t.Error("without a Helm 3, and without " + requireHelm + "=1, the tests do not skip")
	}

	out, err := helm(t, "version", "--template", "{{.Version}}")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "v3.") {
		t.Fatalf("helm version %q: the chart and its tests are for Helm 3 (go install helm.sh/helm/v3/cmd/helm@v3.22.0)", out)
	}
}

// helm runs helm with args and returns its standard output, and its
// standard error as the error when it fails.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmPath(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// helm keeps its repositories and cache here: none of the user's.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v: %s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// render renders the chart as the release "leafd" with extra values
// files' contents and --set flags.
func render(t *testing.T, values []string, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", "leafd", chartDir, "--kube-version", kubeVersion}
	for i, v := range values {
		f := filepath.Join(t.TempDir(), fmt.Sprintf("values%d.yaml", i))
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return helm(t, args...)
}

func mustRender(t *testing.T, values []string, set ...string) []map[string]any {
	t.Helper()
	out, err := render(t, values, set...)
	if err != nil {
		t.Fatal(err)
	}
	return splitManifests(t, out)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHelmManifestsInSync: deploy/kubernetes/leafd.yaml is what the chart
// renders with deploy/kubernetes/values.yaml.
func TestHelmManifestsInSync(t *testing.T) {
	out, err := helm(t, "template", "leafd", chartDir, "--kube-version", kubeVersion, "-f", manifestValues)
	if err != nil {
		t.Fatal(err)
	}
	want := manifestsHeader + out
	if os.Getenv("LEAFD_TEST_UPDATE_MANIFESTS") == "1" {
		if err := os.WriteFile(manifestsFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := readFile(t, manifestsFile)
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s differs from the chart's rendering at line %d:\n  file:  %q\n  chart: %q\nrender it again: LEAFD_TEST_UPDATE_MANIFESTS=1 go test -run TestHelmManifestsInSync ./deploy/", manifestsFile, i+1, gl, wl)
		}
	}
}

// TestHelmLint: helm lint, strict too, passes with the defaults and with
// the values of the plain manifests.
func TestHelmLint(t *testing.T) {
	for _, args := range [][]string{
		{"lint", chartDir},
		{"lint", "--strict", chartDir},
		{"lint", "--strict", chartDir, "-f", manifestValues},
		{"lint", "--strict", chartDir, "--kube-version", kubeVersion, "-f", manifestValues, "--set", "serviceMonitor.enabled=true"},
	} {
		out, err := helm(t, args...)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if !strings.Contains(out, "0 chart(s) failed") || strings.Contains(out, "[ERROR]") || strings.Contains(out, "[WARNING]") {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

// The values of every rendering the schema test checks: each template
// and each branch of them rendered at least once.
var helmCases = []struct {
	name   string
	values string
}{
	{"defaults", ""},
	{"manifests", "@" + manifestValues},
	{"everything", `
replicaCount: 4
store:
  driver: postgres
  dsn: postgres://leafd:pw@db:5432/leaf?sslmode=require
  fallbackDsns: [postgres://leafd:pw@db2:5432/leaf]
  migrateDsn: postgres://owner:pw@db:5432/leaf
adminToken: 0123456789abcdef0123
opaqueKey: 00112233445566778899aabbccddeeff
grpc: {enabled: true, port: 9443}
service: {type: LoadBalancer, port: 8081, annotations: {a: b}}
serviceMonitor: {enabled: true, labels: {release: prom}}
config:
  admin: {protect_dashboard: true}
  log: {format: text, level: debug}
  segment: {seed_tags: [{tag: order, step: 1000}]}
  snowflake: {lease_ttl: 20s}
migration: {ttlSecondsAfterFinished: 600}
shutdownTimeoutSeconds: 20
terminationGracePeriodSeconds: 40
imagePullSecrets: [{name: reg}]
priorityClassName: high
podAnnotations: {example.com/note: leafd}
podLabels: {team: ids}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: k, operator: Exists, effect: NoSchedule}]
affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/name: leafd}}}}]}}
`},
	{"sqlite on a claim", `
store: {sqlite: {existingClaim: leafd-data}}
serviceAccount: {create: false}
podDisruptionBudget: {enabled: false}
`},
	{"no migration job", `
store: {driver: mysql, dsn: "u:p@tcp(db:3306)/leaf?parseTime=true"}
existingSecret: mine
migration: {enabled: false}
replicaCount: 2
`},
}

func caseValues(t *testing.T, v string) []string {
	if f, ok := strings.CutPrefix(v, "@"); ok {
		return []string{readFile(t, f)}
	}
	return []string{v}
}

var (
	dnsLabel   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// TestKubernetesManifestsValid: every object of the plain manifests is
// valid against the Kubernetes API's own schema. It needs no helm.
func TestKubernetesManifestsValid(t *testing.T) {
	v := newKubeValidator(t)
	objs := splitManifests(t, readFile(t, manifestsFile))
	if len(objs) != 6 {
		t.Errorf("%d objects in %s, want 6", len(objs), manifestsFile)
	}
	for _, obj := range objs {
		if err := v.validate(obj); err != nil {
			t.Errorf("%v %v: %v", obj["kind"], obj["metadata"].(map[string]any)["name"], err)
		}
	}
}

// TestHelmObjectsValid: every object the chart renders, in every case
// above, is valid against the Kubernetes API's own schema (OpenAPI, v1.37)
// or the ServiceMonitor CRD, with unknown fields refused.
func TestHelmObjectsValid(t *testing.T) {
	helmPath(t)
	v := newKubeValidator(t)
	kinds := make(map[string]bool)
	check := func(t *testing.T, objs []map[string]any) {
		if len(objs) < 3 {
			t.Fatalf("%d objects rendered", len(objs))
		}
		for _, obj := range objs {
			kinds[obj["kind"].(string)] = true
			name := fmt.Sprintf("%v %v", obj["kind"], obj["metadata"].(map[string]any)["name"])
			if err := v.validate(obj); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			// What the schema leaves to the API server: names and labels.
			meta := obj["metadata"].(map[string]any)
			if n, _ := meta["name"].(string); len(n) > 63 || !dnsLabel.MatchString(n) {
				t.Errorf("%s: the name is not a DNS label (RFC 1123) of at most 63 characters", name)
			}
			if labels, ok := meta["labels"].(map[string]any); ok {
				for k, l := range labels {
					if l, _ := l.(string); len(l) > 63 || !labelValue.MatchString(l) {
						t.Errorf("%s: label %s=%v is not a valid label value", name, k, labels[k])
					}
				}
			}
		}
	}
	for _, c := range helmCases {
		t.Run(c.name, func(t *testing.T) { check(t, mustRender(t, caseValues(t, c.values))) })
	}
	for _, k := range []string{"Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget", "ServiceAccount", "ServiceMonitor", "Job"} {
		if !kinds[k] {
			t.Errorf("no case renders a %s", k)
		}
	}

	// The validator refuses what the API server would: an unknown
	// field, a wrong type, a missing required field.
	dep := func(objs []map[string]any) map[string]any { return find1(t, objs, "Deployment") }
	for name, breakIt := range map[string]func(d map[string]any){
		"unknown field":           func(d map[string]any) { d["spec"].(map[string]any)["replica"] = 3 },
		"unknown container field": func(d map[string]any) { container(t, d)["readinesProbe"] = map[string]any{} },
		"wrong type":              func(d map[string]any) { d["spec"].(map[string]any)["replicas"] = "three" },
		"missing required":        func(d map[string]any) { delete(container(t, d), "name") },
		"bad quantity": func(d map[string]any) {
			container(t, d)["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "256 MB"
		},
	} {
		d := dep(mustRender(t, nil))
		breakIt(d)
		if err := v.validate(d); err == nil {
			t.Errorf("a Deployment with this change passes the schema (%s): the validator checks nothing", name)
		}
	}
	sm := find1(t, mustRender(t, caseValues(t, helmCases[2].values)), "ServiceMonitor")
	sm["spec"].(map[string]any)["endpoint"] = []any{}
	if err := v.validate(sm); err == nil {
		t.Error("a ServiceMonitor with an unknown field passes the schema")
	}
}

// TestHelmRefuses: values that would run leafd unsafely stop the
// rendering (install, upgrade, template) with a message that says why.
func TestHelmRefuses(t *testing.T) {
	for _, c := range []struct {
		name   string
		values string
		want   string
	}{
		{"sqlite with replicas", "replicaCount: 3", "SQLite serves one pod only"},
		{"sqlite with replicas on a claim", "replicaCount: 2\nstore: {sqlite: {existingClaim: data}}", "SQLite serves one pod only"},
		{"database without a DSN", "store: {driver: mysql}", "set store.dsn, or existingSecret"},
		{"grace period shorter than the drain", "shutdownTimeoutSeconds: 30", "Raise terminationGracePeriodSeconds to 40"},
		{"DSN in config", "config: {store: {dsn: x}}", "config.store.dsn is set by the chart"},
		{"listen address in config", "config: {http: {addr: \":9000\"}}", "config.http.addr is set by the chart: use service.port"},
		{"fixed worker id with replicas", "store: {driver: mysql, dsn: \"u:p@tcp(db:3306)/leaf\"}\nreplicaCount: 2\nconfig: {snowflake: {worker_id: 0}}", "every pod would use the same worker id"},
		{"fallbacks with sqlite", "store: {fallbackDsns: [a]}", "store.fallbackDsns is set but store.driver is sqlite"},
		{"short admin token", "adminToken: short", "/adminToken"},
		{"admin token with a space", "adminToken: 0123456789 abcdef0123", "/adminToken"},
		{"short opaque key", "opaqueKey: 0011223344", "/opaqueKey"},
		{"opaque key of an odd length", "opaqueKey: 00112233445566778899aabbccddeeff0", "/opaqueKey"},
		{"unknown driver", "store: {driver: oracle}", "/store/driver"},
		{"managedBy not a label value", "managedBy: \"kubectl apply\"", "/managedBy"},
		{"misspelt value", "replicas: 3", "replicas"},
		{"unknown config section", "config: {segments: {}}", "segments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(t, []string{c.values})
			if err == nil {
				t.Fatalf("values %q render", c.values)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not say %q:\n%v", c.want, err)
			}
		})
	}
	// The same values with one replica, or a database, render.
	for _, ok := range []string{"opaqueKey: 00112233445566778899aabbccddeeff00", "replicaCount: 1", "replicaCount: 3\nstore: {driver: mysql, dsn: \"u:p@tcp(db:3306)/leaf\"}", "shutdownTimeoutSeconds: 15", "shutdownTimeoutSeconds: 30\nterminationGracePeriodSeconds: 40"} {
		if _, err := render(t, []string{ok}); err != nil {
			t.Errorf("values %q: %v", ok, err)
		}
	}
}

// TestHelmSchemaOpaqueKey: the schema's pattern for opaqueKey accepts
// exactly the keys leafd accepts (segment.ParseOpaqueKey): whole bytes of
// hex, at least 16 of them, or none. A key leafd refuses would pass helm
// and crash-loop the pods.
func TestHelmSchemaOpaqueKey(t *testing.T) {
	var schema struct {
		Properties struct {
			OpaqueKey struct{ Pattern string }
		}
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "values.schema.json"))), &schema); err != nil {
		t.Fatal(err)
	}
	re, err := regexp.Compile(schema.Properties.OpaqueKey.Pattern)
	if err != nil || schema.Properties.OpaqueKey.Pattern == "" {
		t.Fatalf("opaqueKey pattern %q: %v", schema.Properties.OpaqueKey.Pattern, err)
	}
	keys := []string{"", " ", strings.Repeat("0", 32) + " ", "0x" + strings.Repeat("a", 32), strings.Repeat("g", 32), strings.Repeat("Ab", 16) + "\n"}
	for n := 1; n <= 70; n++ {
		keys = append(keys, strings.Repeat("aF", n)[:n])
	}
	for _, k := range keys {
		_, perr := segment.ParseOpaqueKey(k)
		if re.MatchString(k) != (perr == nil) {
			t.Errorf("opaque key %q (%d characters): the schema accepts it: %v; leafd: %v", k, len(k), re.MatchString(k), perr)
		}
	}
}

// TestHelmPlainManifests checks what the plain manifests run: leafd's own
// configuration loader accepts the ConfigMap's config.yaml with the
// Deployment's environment; the ports, probes, termination and security
// settings are those leafd needs.
func TestHelmPlainManifests(t *testing.T) {
	objs := splitManifests(t, readFile(t, manifestsFile))
	d := find1(t, objs, "Deployment")
	pod := dig(t, d, "spec", "template", "spec")
	c := container(t, d)
	find1(t, objs, "ConfigMap")
	if slices.ContainsFunc(objs, func(o map[string]any) bool { return o["kind"] == "Secret" }) {
		t.Error("the plain manifests hold a Secret: the DSN and the tokens are the user's")
	}

	// The configuration, as the pod's leafd would load it.
	secret := map[string]string{ // what the user's Secret leafd holds
		"dsn":         "leafd:s3cr:t@tcp(db:3306)/leaf?parseTime=true",
		"admin-token": "0123456789abcdef0123456789abcdef",
		"opaque-key":  "00112233445566778899aabbccddeeff",
	}
	args := strings.Join(stringList(t, c["args"]), " ")
	if args != "serve --config /etc/leafd/config.yaml" {
		t.Errorf("args %q", args)
	}
	cfg, err := podConfig(t, objs, pod, c, "leafd", secret)
	if err != nil {
		t.Fatalf("leafd refuses the manifests' configuration (it refuses an unknown LEAFD_ variable too): %v", err)
	}
	if cfg.Store.Driver != "mysql" || cfg.Store.DSN != secret["dsn"] || cfg.Store.Migrate {
		t.Errorf("store %+v: want mysql, the Secret's DSN, migrate false (the Job migrates)", cfg.Store)
	}
	if cfg.Admin.Token != secret["admin-token"] {
		t.Error("admin.token is not the Secret's")
	}
	if cfg.Snowflake.WorkerID.String() != "auto" {
		t.Errorf("snowflake.worker_id %v: every replica would share it", cfg.Snowflake.WorkerID)
	}

	// Ports: leafd listens on every interface, on the container's ports,
	// which the Service targets by name.
	checkListens(t, c, cfg)
	svc := find1(t, objs, "Service")
	var svcPorts []string
	for _, p := range list(t, dig(t, svc, "spec")["ports"]) {
		svcPorts = append(svcPorts, fmt.Sprint(p.(map[string]any)["targetPort"]))
	}
	if !slices.Equal(svcPorts, []string{"http", "grpc"}) {
		t.Errorf("Service targets %v, want http and grpc", svcPorts)
	}
	selects := func(sel map[string]any, labels map[string]any) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	podLabels := dig(t, d, "spec", "template", "metadata", "labels")
	job := find1(t, objs, "Job")
	jobLabels := dig(t, job, "spec", "template", "metadata", "labels")
	for _, o := range []map[string]any{svc, find1(t, objs, "PodDisruptionBudget")} {
		sel := dig(t, o, "spec", "selector")
		if m, ok := sel["matchLabels"].(map[string]any); ok {
			sel = m
		}
		if !selects(sel, podLabels) || selects(sel, jobLabels) {
			t.Errorf("%s selects %v: want the servers' pods, not the migration Job's", o["kind"], sel)
		}
	}

	// Probes.
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		g := dig(t, c, probe, "httpGet")
		if g["path"] != path || g["port"] != "http" {
			t.Errorf("%s %v, want GET %s on http", probe, g, path)
		}
	}

	// Termination: the grace period covers the preStop sleep, the drain
	// and the lease's release.
	grace := toFloat(pod["terminationGracePeriodSeconds"])
	sleep := stringList(t, dig(t, c, "lifecycle", "preStop", "exec")["command"])
	s, err := strconv.Atoi(sleep[len(sleep)-1])
	if sleep[0] != "sleep" || err != nil {
		t.Fatalf("preStop %v, want a sleep", sleep)
	}
	if need := time.Duration(s)*time.Second + cfg.HTTP.ShutdownTimeout + 5*time.Second; time.Duration(grace)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds %v < preStop %ds + http.shutdown_timeout %v + 5s", grace, s, cfg.HTTP.ShutdownTimeout)
	}

	// Security: the image's uid, nothing leafd does not need.
	for _, o := range []map[string]any{d, job} {
		psc := dig(t, o, "spec", "template", "spec", "securityContext")
		if psc["runAsNonRoot"] != true || toFloat(psc["runAsUser"]) != 10001 || dig(t, psc, "seccompProfile")["type"] != "RuntimeDefault" {
			t.Errorf("%s pod securityContext %v", o["kind"], psc)
		}
		for _, ci := range list(t, dig(t, o, "spec", "template", "spec")["containers"]) {
			sc := dig(t, ci.(map[string]any), "securityContext")
			if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false ||
				!slices.Equal(stringList(t, dig(t, sc, "capabilities")["drop"]), []string{"ALL"}) {
				t.Errorf("%s container securityContext %v", o["kind"], sc)
			}
		}
		if dig(t, o, "spec", "template", "spec")["automountServiceAccountToken"] != false {
			t.Errorf("%s mounts a service account token", o["kind"])
		}
	}
	// With MySQL, leafd writes nothing: no writable volume at all.
	for _, vol := range list(t, pod["volumes"]) {
		if _, ok := vol.(map[string]any)["emptyDir"]; ok {
			t.Errorf("volume %v: leafd over MySQL writes nothing", vol)
		}
	}
	// Applied with kubectl: no object says Helm manages it, so that
	// neither a person nor a tool takes them for a release's.
	for _, o := range objs {
		for _, v := range managedBy(o) {
			if v != "kubectl" {
				t.Errorf("%s %v: app.kubernetes.io/managed-by %v, want kubectl", o["kind"], dig(t, o, "metadata")["name"], v)
			}
		}
		if len(managedBy(o)) == 0 {
			t.Errorf("%s %v: no app.kubernetes.io/managed-by label", o["kind"], dig(t, o, "metadata")["name"])
		}
	}
	res := dig(t, c, "resources")
	if dig(t, res, "limits")["memory"] == nil || dig(t, res, "requests")["memory"] == nil {
		t.Errorf("resources %v: want memory requests and limits", res)
	}
}

// managedBy returns the app.kubernetes.io/managed-by labels of obj and
// of the templates inside it.
func managedBy(obj any) []any {
	var out []any
	switch o := obj.(type) {
	case map[string]any:
		for k, v := range o {
			if l, ok := v.(map[string]any); ok && k == "labels" {
				if m, ok := l["app.kubernetes.io/managed-by"]; ok {
					out = append(out, m)
				}
			}
			out = append(out, managedBy(v)...)
		}
	case []any:
		for _, v := range o {
			out = append(out, managedBy(v)...)
		}
	}
	return out
}

// TestHelmManagedBy: a release's objects say Helm manages them.
func TestHelmManagedBy(t *testing.T) {
	for _, o := range mustRender(t, caseValues(t, helmCases[2].values)) {
		for _, v := range managedBy(o) {
			if v != "Helm" {
				t.Errorf("%s: app.kubernetes.io/managed-by %v, want Helm", o["kind"], v)
			}
		}
	}
}

// TestHelmSQLite: the default values run one pod over SQLite whose file is
// on the one writable volume, where leafd's default DSN puts it.
func TestHelmSQLite(t *testing.T) {
	objs := mustRender(t, nil)
	d := find1(t, objs, "Deployment")
	if r := toFloat(dig(t, d, "spec")["replicas"]); r != 1 {
		t.Errorf("replicas %v", r)
	}
	if typ := dig(t, d, "spec", "strategy")["type"]; typ != "Recreate" {
		t.Errorf("strategy %v: a rolling update would run two pods on two files", typ)
	}
	c := container(t, d)
	data := mountOf(t, c, "/var/lib/leafd/data") // the image's WORKDIR + data/ of file:data/leafd.db
	if _, ok := volume(t, dig(t, d, "spec", "template", "spec"), data)["emptyDir"]; !ok {
		t.Errorf("the data volume is not an emptyDir")
	}
	if len(list(t, c["volumeMounts"])) != 2 {
		t.Errorf("mounts %v: want the config and the data only", c["volumeMounts"])
	}
	cfg := config.Default()
	if cfg.Store.DSN != "file:data/leafd.db" {
		t.Errorf("leafd's default DSN is %q: the data volume's mount path follows it", cfg.Store.DSN)
	}
	if slices.ContainsFunc(objs, func(o map[string]any) bool { return o["kind"] == "Job" }) {
		t.Error("a migration Job with SQLite")
	}

	checkSQLiteTemp(t, d)

	claim := find1(t, mustRender(t, []string{"store: {sqlite: {existingClaim: leafd-data}}"}), "Deployment")
	vol := volume(t, dig(t, claim, "spec", "template", "spec"), "data")
	if dig(t, vol, "persistentVolumeClaim")["claimName"] != "leafd-data" {
		t.Errorf("data volume %v, want the claim", vol)
	}
	checkSQLiteTemp(t, claim)
}

// checkSQLiteTemp checks that SQLite finds a directory for its temporary
// files (statement journals, sorts, temporary tables) in the pods of the
// Deployment d. SQLite takes the first of SQLITE_TMPDIR, TMPDIR, /var/tmp,
// /usr/tmp, /tmp and the working directory that it may write
// (unixTempFileDir): under a read-only root filesystem, only a writable
// volume counts, at its mount path (a directory below it need not exist).
func checkSQLiteTemp(t *testing.T, d map[string]any) {
	t.Helper()
	c := container(t, d)
	if dig(t, c, "securityContext")["readOnlyRootFilesystem"] != true {
		return // any of /var/tmp, /tmp and the working directory will do
	}
	writable := map[string]bool{}
	for _, m := range list(t, c["volumeMounts"]) {
		m := m.(map[string]any)
		vol := volume(t, dig(t, d, "spec", "template", "spec"), m["name"].(string))
		if m["readOnly"] != true && (vol["emptyDir"] != nil || vol["persistentVolumeClaim"] != nil) {
			writable[path.Clean(m["mountPath"].(string))] = true
		}
	}
	env := imageEnv(t)
	if c["env"] != nil {
		for _, e := range list(t, c["env"]) {
			if e := e.(map[string]any); e["value"] != nil {
				env[e["name"].(string)] = fmt.Sprint(e["value"])
			}
		}
	}
	tried := []string{env["SQLITE_TMPDIR"], env["TMPDIR"], "/var/tmp", "/usr/tmp", "/tmp", "/var/lib/leafd"} // the image's WORKDIR
	for _, dir := range tried {
		if dir != "" && writable[path.Clean(dir)] {
			return
		}
	}
	t.Errorf("SQLite has no writable directory for its temporary files: it tries %q, the writable volumes are %v (set TMPDIR to one)", tried, writable)
}

// podConfig loads leafd's configuration as container c of pod would: the
// ConfigMap mounted at /etc/leafd as its config.yaml, and the image's ENV
// (../Dockerfile) overridden by the container's environment (podEnv).
func podConfig(t *testing.T, objs []map[string]any, pod, c map[string]any, secretName string, secret map[string]string) (*config.Config, error) {
	t.Helper()
	return loadConfigEnv(t, podConfigFile(t, objs, pod, c), withImageEnv(t, podEnv(t, c, secretName, secret)))
}

// podEnv returns the environment of container c, with the values of
// secretKeyRefs to the Secret secretName taken from secret. A reference
// to another Secret, or to a key the Secret lacks without optional, fails
// the test.
func podEnv(t *testing.T, c map[string]any, secretName string, secret map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	if c["env"] == nil {
		return env
	}
	for _, e := range list(t, c["env"]) {
		e := e.(map[string]any)
		name := e["name"].(string)
		if v, ok := e["value"].(string); ok {
			env[name] = v
			continue
		}
		ref := dig(t, e, "valueFrom", "secretKeyRef")
		if ref["name"] != secretName {
			t.Errorf("%s comes from Secret %v, want %s", name, ref["name"], secretName)
		}
		if v, ok := secret[ref["key"].(string)]; ok {
			env[name] = v
		} else if ref["optional"] != true {
			t.Errorf("%s needs key %v, which the Secret need not hold", name, ref["key"])
		}
	}
	return env
}

// podConfigFile writes the config.yaml that container c of pod reads, the
// ConfigMap mounted at /etc/leafd, to a file and returns its path.
func podConfigFile(t *testing.T, objs []map[string]any, pod, c map[string]any) string {
	t.Helper()
	vol := volume(t, pod, mountOf(t, c, "/etc/leafd"))
	var data string
	for _, o := range objs {
		if o["kind"] == "ConfigMap" && dig(t, o, "metadata")["name"] == dig(t, vol, "configMap")["name"] {
			data, _ = dig(t, o, "data")["config.yaml"].(string)
		}
	}
	if data == "" {
		t.Fatalf("/etc/leafd is %v: no ConfigMap of the release with config.yaml", vol)
	}
	if got := stringList(t, c["args"]); !slices.Equal(got[1:], []string{"--config", "/etc/leafd/config.yaml"}) {
		t.Errorf("args %v do not read /etc/leafd/config.yaml", got)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkListens checks that the server container c listens where its
// ports say: leafd's http.addr and grpc.addr (if it serves gRPC) on every
// interface, on the container ports named http and grpc, which the
// probes and the Service target.
func checkListens(t *testing.T, c map[string]any, cfg *config.Config) {
	t.Helper()
	ports := map[string]float64{}
	for _, p := range list(t, c["ports"]) {
		p := p.(map[string]any)
		ports[p["name"].(string)] = toFloat(p["containerPort"])
	}
	addrs := map[string]string{"http": cfg.HTTP.Addr}
	if cfg.GRPC.Addr != "" || ports["grpc"] != 0 {
		addrs["grpc"] = cfg.GRPC.Addr
	}
	for name, addr := range addrs {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "0.0.0.0" && host != "" {
			t.Errorf("%s address %q: not every interface", name, addr)
			continue
		}
		if n, _ := strconv.Atoi(port); float64(n) != ports[name] {
			t.Errorf("%s listens on %s, the container port %s is %v", name, port, name, ports[name])
		}
	}
}

// TestImageEnv: the tests load leafd's configuration with the image's ENV,
// read from the Dockerfile as docker reads it.
func TestImageEnv(t *testing.T) {
	env := imageEnv(t)
	if env["LEAFD_HTTP_ADDR"] != "0.0.0.0:8080" || env["LEAFD_LOG_FORMAT"] != "json" {
		t.Errorf("the image's ENV is %v, want LEAFD_HTTP_ADDR=0.0.0.0:8080 and LEAFD_LOG_FORMAT=json as the Dockerfile says", env)
	}
	for in, want := range map[string][]string{
		`A=1 B=2`:               {"A=1", "B=2"},
		`A="x y" B='$z' C=a\ b`: {"A=x y", "B=$z", "C=a b"},
		`A="q\"r"  B=`:          {`A=q"r`, "B="},
	} {
		if got, err := dockerWords(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("dockerWords(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := dockerWords(`A="x`); err == nil {
		t.Error("an unclosed quote is accepted")
	}
}

// TestHelmConfigAccepted: in every case, leafd's own configuration loader
// accepts what the server and the migration Job would load: the
// ConfigMap's config.yaml and the environment from the Secret (the
// rendered one, or a user's Secret holding every documented key).
func TestHelmConfigAccepted(t *testing.T) {
	for _, tc := range helmCases {
		t.Run(tc.name, func(t *testing.T) {
			values := caseValues(t, tc.values)
			objs := mustRender(t, values)
			var v struct {
				ExistingSecret string `yaml:"existingSecret"`
			}
			if err := yaml.Unmarshal([]byte(values[0]), &v); err != nil {
				t.Fatal(err)
			}
			secretName, rendered := v.ExistingSecret, false
			secret := map[string]string{ // a user's Secret
				"admin-token":   "0123456789abcdef0123456789abcdef",
				"opaque-key":    "00112233445566778899aabbccddeeff",
				"dsn":           "leafd:pw@tcp(db:3306)/leaf?parseTime=true",
				"migrate-dsn":   "owner:pw@tcp(db:3306)/leaf?parseTime=true",
				"fallback-dsns": "leafd:pw@tcp(db2:3306)/leaf?parseTime=true",
			}
			for _, o := range objs {
				if o["kind"] == "Secret" {
					if secretName != "" {
						t.Errorf("a Secret rendered beside existingSecret %s", secretName)
					}
					secretName = dig(t, o, "metadata")["name"].(string)
					rendered = true
					secret = map[string]string{}
					for k, v := range dig(t, o, "stringData") {
						secret[k] = v.(string)
					}
				}
			}
			if secretName == "" {
				secret = nil // no Secret at all: SQLite's default file, no tokens
			}
			job := slices.ContainsFunc(objs, func(o map[string]any) bool { return o["kind"] == "Job" })
			for _, o := range objs {
				if o["kind"] != "Deployment" && o["kind"] != "Job" {
					continue
				}
				cfg, err := podConfig(t, objs, dig(t, o, "spec", "template", "spec"), container(t, o), secretName, secret)
				if err != nil {
					t.Errorf("%s: leafd refuses its configuration: %v", o["kind"], err)
					continue
				}
				if o["kind"] == "Deployment" && cfg.Store.Migrate == job {
					t.Errorf("store.migrate is %v with a migration Job: %v", cfg.Store.Migrate, job)
				}
				want := secret["dsn"] // the servers' DSN, and the Job's unless the chart holds another
				if want == "" {
					want = config.Default().Store.DSN // SQLite without a DSN
				}
				if o["kind"] == "Job" && rendered && secret["migrate-dsn"] != "" {
					want = secret["migrate-dsn"]
				}
				if cfg.Store.DSN != want {
					t.Errorf("%s's DSN is %q, want %q", o["kind"], cfg.Store.DSN, want)
				}
				if o["kind"] == "Deployment" {
					checkListens(t, container(t, o), cfg)
				}
				// The image's ENV (LEAFD_HTTP_ADDR, LEAFD_LOG_FORMAT) outranks
				// config.yaml: what the chart configures must win over it.
				pod, c := dig(t, o, "spec", "template", "spec"), container(t, o)
				own, err := loadConfigEnv(t, podConfigFile(t, objs, pod, c), podEnv(t, c, secretName, secret))
				if err != nil {
					t.Fatalf("%s: leafd refuses its configuration without the image's ENV: %v", o["kind"], err)
				}
				if !reflect.DeepEqual(cfg, own) {
					t.Errorf("%s: the image's ENV changes the configuration the chart gives: http.addr %q, log.format %q in the pod; %q, %q from the chart", o["kind"], cfg.HTTP.Addr, cfg.Log.Format, own.HTTP.Addr, own.Log.Format)
				}
				if f := chartLogFormat(t, objs); cfg.Log.Format != f {
					t.Errorf("%s logs %s, config.log.format is %s", o["kind"], cfg.Log.Format, f)
				}
			}
		})
	}
}

// chartLogFormat returns config.log.format of the release's config.yaml,
// or the image's json if it sets none.
func chartLogFormat(t *testing.T, objs []map[string]any) string {
	t.Helper()
	var cfg struct {
		Log struct{ Format string }
	}
	if err := yaml.Unmarshal([]byte(find1(t, objs, "ConfigMap")["data"].(map[string]any)["config.yaml"].(string)), &cfg); err != nil {
		t.Fatal(err)
	}
	return cmp.Or(cfg.Log.Format, "json")
}

func find1(t *testing.T, objs []map[string]any, kind string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, o := range objs {
		if o["kind"] == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

func dig(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	for i, p := range path {
		n, ok := m[p].(map[string]any)
		if !ok {
			t.Fatalf("no map at %s", strings.Join(path[:i+1], "."))
		}
		m = n
	}
	return m
}

func list(t *testing.T, v any) []any {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a list", v)
	}
	return l
}

func stringList(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	for _, e := range list(t, v) {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case float64:
		return n
	}
	return -1
}

func container(t *testing.T, d map[string]any) map[string]any {
	t.Helper()
	cs := list(t, dig(t, d, "spec", "template", "spec")["containers"])
	if len(cs) != 1 {
		t.Fatalf("%d containers", len(cs))
	}
	return cs[0].(map[string]any)
}

// mountOf returns the name of the volume mounted at path.
func mountOf(t *testing.T, c map[string]any, path string) string {
	t.Helper()
	for _, m := range list(t, c["volumeMounts"]) {
		if m := m.(map[string]any); m["mountPath"] == path {
			return m["name"].(string)
		}
	}
	t.Fatalf("nothing mounted at %s", path)
	return ""
}

func volume(t *testing.T, pod map[string]any, name string) map[string]any {
	t.Helper()
	for _, v := range list(t, pod["volumes"]) {
		if v := v.(map[string]any); v["name"] == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return nil
}

// renderNotes renders the chart's NOTES.txt, which helm template and helm
// lint leave out, by rendering a copy of the chart in which it is a value.
func renderNotes(t *testing.T, values string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "leafd")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	notes := readFile(t, filepath.Join(chartDir, "templates", "NOTES.txt"))
	check := "{{- define \"leafd.notesCheck\" }}" + notes + "{{ end }}\nnotes: {{ include \"leafd.notesCheck\" . | toJson }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes-check.yaml"), []byte(check), 0o600); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "template", "leafd", dir, "--kube-version", kubeVersion, "-f", f, "--show-only", "templates/notes-check.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Notes string }
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil || doc.Notes == "" {
		t.Fatalf("notes %q: %v", out, err)
	}
	return doc.Notes
}

// TestHelmNotes: the notes shown after an install warn about SQLite on an
// emptyDir and name the migration Job.
func TestHelmNotes(t *testing.T) {
	sqlite := renderNotes(t, "")
	for _, want := range []string{"http://leafd.default.svc:8080", "WARNING: SQLite on an emptyDir", "hands out\nthe same IDs again", "No admin token"} {
		if !strings.Contains(sqlite, want) {
			t.Errorf("notes with the defaults lack %q:\n%s", want, sqlite)
		}
	}
	mysql := renderNotes(t, readFile(t, manifestValues))
	for _, want := range []string{"gRPC (plaintext h2c): leafd.default.svc:9090", "logs job/leafd-migrate-1"} {
		if !strings.Contains(mysql, want) {
			t.Errorf("notes of the manifests' values lack %q:\n%s", want, mysql)
		}
	}
	if strings.Contains(mysql, "WARNING") || strings.Contains(mysql, "No admin token") {
		t.Errorf("notes over MySQL with a Secret warn:\n%s", mysql)
	}
}

// TestHelmSecretKeepsDSN: a DSN and tokens holding every printable ASCII
// character reach the Secret the chart renders unchanged (the password of
// a MySQL DSN is written as it is: docs/deployment.md#mysql).
func TestHelmSecretKeepsDSN(t *testing.T) {
	var ascii strings.Builder
	for c := byte(0x21); c < 0x7f; c++ {
		ascii.WriteByte(c)
	}
	want := map[string]string{
		"dsn":         "leafd:" + ascii.String() + " '\"{{ .Values }}@tcp(db:3306)/leaf?parseTime=true",
		"admin-token": ascii.String(),
	}
	values := fmt.Sprintf("store: {driver: mysql, dsn: %s}\nadminToken: %s\n", strconv.Quote(want["dsn"]), strconv.Quote(want["admin-token"]))
	secret := find1(t, mustRender(t, []string{values}), "Secret")
	got := dig(t, secret, "stringData")
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q in the Secret, want %q", k, got[k], v)
		}
	}
}
