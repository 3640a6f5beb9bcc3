package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// The schemas the chart's objects are checked against, from Go modules at
// pinned versions (the Go module proxy serves them; GitHub, where
// kubeconform fetches its schemas, is not needed). The sums are the
// modules' go.sum hashes: a module that is not the pinned one fails.
const (
	// k8s.io/kubernetes ships the API's OpenAPI v2 document in
	// api/openapi-spec/swagger.json.
	kubernetesModule = "k8s.io/kubernetes@v1.37.2"
	kubernetesSum    = "h1:A2VDEiObzkYqFTKhSsn0ZEb0RlLEXpHWj93gi2HqEwE="
	// prometheus-operator ships its CRDs in example/prometheus-operator-crd.
	promOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
	promOperatorSum    = "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s="
)

// moduleDir downloads module (path@version) through the go command, into
// the module cache, checks its hash against sum and returns its directory.
// Without the module proxy it skips, or fails under LEAFD_TEST_REQUIRE_HELM=1.
func moduleDir(t *testing.T, module, sum string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = t.TempDir() // outside leafd's module: its go.mod stays as it is
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var m struct{ Dir, Sum, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil || m.Error != "" {
		missing(t, fmt.Sprintf("go mod download %s: %v %s", module, err, m.Error))
	}
	if m.Sum != sum {
		t.Fatalf("%s has hash %s, want %s: not the pinned module", module, m.Sum, sum)
	}
	return m.Dir
}

// kubeValidator validates Kubernetes objects against the OpenAPI schema of
// their apiVersion and kind, made strict: a field the schema does not name
// is refused (the API server would drop it, or refuse it with
// fieldValidation=Strict), as kubeconform -strict does.
type kubeValidator struct {
	compiler *jsonschema.Compiler
	defs     map[string]string // "apps/v1 Deployment" → "#/definitions/…" or a CRD's URL
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

var (
	kubeOnce      sync.Once
	kubeShared    *kubeValidator
	kubeSharedErr error
)

// newKubeValidator loads the schemas once per test binary.
func newKubeValidator(t *testing.T) *kubeValidator {
	t.Helper()
	k8s := moduleDir(t, kubernetesModule, kubernetesSum)
	prom := moduleDir(t, promOperatorModule, promOperatorSum)
	kubeOnce.Do(func() { kubeShared, kubeSharedErr = loadKubeValidator(k8s, prom) })
	if kubeSharedErr != nil {
		t.Fatal(kubeSharedErr)
	}
	return kubeShared
}

func loadKubeValidator(k8sDir, promDir string) (*kubeValidator, error) {
	b, err := os.ReadFile(filepath.Join(k8sDir, "api", "openapi-spec", "swagger.json"))
	if err != nil {
		return nil, err
	}
	var swagger struct {
		Definitions map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(b, &swagger); err != nil {
		return nil, err
	}
	if len(swagger.Definitions) < 500 {
		return nil, fmt.Errorf("swagger.json has %d definitions: not the Kubernetes API?", len(swagger.Definitions))
	}
	v := &kubeValidator{
		compiler: jsonschema.NewCompiler(),
		defs:     make(map[string]string),
		compiled: make(map[string]*jsonschema.Schema),
	}
	v.compiler.DefaultDraft(jsonschema.Draft4)
	for name, d := range swagger.Definitions {
		def := d.(map[string]any)
		strict(def)
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			g := g.(map[string]any)
			v.defs[gvk(g["group"].(string), g["version"].(string), g["kind"].(string))] = "kubernetes.json#/definitions/" + name
		}
	}
	// Values the API accepts as a string or a number, which OpenAPI v2
	// can only call strings with a format.
	swagger.Definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = map[string]any{
		"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}},
	}
	swagger.Definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"] = map[string]any{
		"anyOf": []any{map[string]any{"type": "string", "pattern": `^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$`}, map[string]any{"type": "number"}},
	}
	if err := addResource(v.compiler, "kubernetes.json", map[string]any{"definitions": swagger.Definitions}); err != nil {
		return nil, err
	}

	// The ServiceMonitor CRD: its openAPIV3Schema for each version.
	b, err = os.ReadFile(filepath.Join(promDir, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"))
	if err != nil {
		return nil, err
	}
	var crd struct {
		Spec struct {
			Group    string
			Names    struct{ Kind string }
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return nil, err
	}
	for _, ver := range crd.Spec.Versions {
		s := ver.Schema.OpenAPIV3Schema
		if s == nil {
			return nil, fmt.Errorf("the ServiceMonitor CRD's %s has no schema", ver.Name)
		}
		strict(s)
		url := crd.Spec.Names.Kind + "-" + ver.Name + ".json"
		if err := addResource(v.compiler, url, s); err != nil {
			return nil, err
		}
		v.defs[gvk(crd.Spec.Group, ver.Name, crd.Spec.Names.Kind)] = url
	}
	if _, ok := v.defs["monitoring.coreos.com/v1 ServiceMonitor"]; !ok {
		return nil, fmt.Errorf("no ServiceMonitor monitoring.coreos.com/v1 in the CRD")
	}
	return v, nil
}

// addResource adds a schema made of plain Go values, as jsonschema reads
// JSON (numbers as json.Number).
func addResource(c *jsonschema.Compiler, url string, doc any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	d, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return c.AddResource(url, d)
}

func gvk(group, version, kind string) string {
	if group == "" {
		return version + " " + kind
	}
	return group + "/" + version + " " + kind
}

// strict makes a schema refuse what it does not name: every object schema
// with properties and no additionalProperties gets additionalProperties
// false, unless it keeps unknown fields on purpose. It also writes the
// Kubernetes extensions of OpenAPI v3 (CRDs) as JSON Schema: int-or-string
// as a string or an integer, nullable as a null allowed.
func strict(s map[string]any) {
	if s["x-kubernetes-int-or-string"] == true {
		delete(s, "type")
		s["anyOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
	}
	if s["nullable"] == true {
		if t, ok := s["type"].(string); ok {
			s["type"] = []any{t, "null"}
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			if p, ok := p.(map[string]any); ok {
				strict(p)
			}
		}
		if _, ok := s["additionalProperties"]; !ok && s["x-kubernetes-preserve-unknown-fields"] != true {
			s["additionalProperties"] = false
		}
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		strict(ap)
	}
	if items, ok := s["items"].(map[string]any); ok {
		strict(items)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if l, ok := s[k].([]any); ok {
			for _, e := range l {
				if e, ok := e.(map[string]any); ok {
					strict(e)
				}
			}
		}
	}
}

// validate checks one object, decoded from YAML, against the schema of its
// apiVersion and kind. An object of a kind the schemas lack is an error.
func (v *kubeValidator) validate(obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	url, ok := v.defs[apiVersion+" "+kind]
	if !ok {
		return fmt.Errorf("no schema for apiVersion %q kind %q", apiVersion, kind)
	}
	v.mu.Lock()
	s, ok := v.compiled[url]
	if !ok {
		var err error
		if s, err = v.compiler.Compile(url); err != nil {
			v.mu.Unlock()
			return err
		}
		v.compiled[url] = s
	}
	v.mu.Unlock()
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// splitManifests decodes a multi-document YAML stream into its objects,
// refusing duplicate keys and empty documents in the middle.
func splitManifests(t *testing.T, manifests string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(manifests))
	var objs []map[string]any
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("rendered YAML does not decode: %v", err)
		}
		if obj == nil {
			continue // a document holding only comments
		}
		objs = append(objs, obj)
	}
	return objs
}
