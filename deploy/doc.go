// Package deploy holds no code: its tests check the deployment files —
// the Helm chart and the plain Kubernetes manifests rendered from it (helm
// lint, helm template, the Kubernetes API's schema, leafd's own
// configuration loader), docker-compose.yml (with the Compose
// specification's own loader), the Dockerfile's Go against go.mod,
// passwords in DSNs, the Prometheus alerting rules of prometheus/ (with
// promtool, when installed), and the rules', the Grafana dashboard's and
// docs/metrics.md's metrics against what /metrics really exports. They
// live in a package of their own so that their dependencies,
// such as github.com/compose-spec/compose-go/v2, are these tests' only and
// never the leafd binary's.
package deploy
