{{/* The chart's name, or nameOverride. */}}
{{- define "leafd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects: the release name, with the chart's name unless it holds it. */}}
{{- define "leafd.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "leafd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "leafd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Values.managedBy | default .Release.Service }}
{{- end }}

{{- define "leafd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leafd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The server pods' labels: the migration Job's pods are not the Service's. */}}
{{- define "leafd.serverSelectorLabels" -}}
{{ include "leafd.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{- define "leafd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "leafd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "leafd.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "leafd.secretName" -}}
{{- .Values.existingSecret | default (include "leafd.fullname" .) }}
{{- end }}

{{/* Whether a migration Job runs: with a database server and migration.enabled. */}}
{{- define "leafd.migrationJob" -}}
{{- if and .Values.migration.enabled (ne .Values.store.driver "sqlite") }}true{{ end }}
{{- end }}

{{/*
The checks of values that the schema cannot express. Each stops the
rendering with the reason and the fix.
*/}}
{{- define "leafd.validate" -}}
{{- if and (eq .Values.store.driver "sqlite") (gt (int .Values.replicaCount) 1) }}
{{- fail (printf "store.driver is sqlite but replicaCount is %d: SQLite serves one pod only. On an emptyDir each pod would have its own file and hand out the same IDs as the others, and a file shared through a volume is not safely locked between nodes. Set replicaCount to 1, or run several replicas over MySQL or PostgreSQL (store.driver mysql or postgres, with store.dsn or existingSecret)" (int .Values.replicaCount)) }}
{{- end }}
{{- if and (ne .Values.store.driver "sqlite") (not .Values.store.dsn) (not .Values.existingSecret) }}
{{- fail (printf "store.driver is %s but no DSN is given: set store.dsn, or existingSecret to a Secret holding the key dsn" .Values.store.driver) }}
{{- end }}
{{- if and (eq .Values.store.driver "sqlite") .Values.store.fallbackDsns }}
{{- fail "store.fallbackDsns is set but store.driver is sqlite: fallback DSNs are further addresses of a MySQL or PostgreSQL cluster" }}
{{- end }}
{{- if and .Values.store.sqlite.existingClaim (ne .Values.store.driver "sqlite") }}
{{- fail (printf "store.sqlite.existingClaim is set but store.driver is %s: the claim holds a SQLite file only" .Values.store.driver) }}
{{- end }}
{{- $min := add .Values.preStopSleepSeconds .Values.shutdownTimeoutSeconds 5 }}
{{- if lt (int .Values.terminationGracePeriodSeconds) (int $min) }}
{{- fail (printf "terminationGracePeriodSeconds is %d, below preStopSleepSeconds (%d) + shutdownTimeoutSeconds (%d) + 5 s for the snowflake lease's release = %d: the kubelet would kill leafd mid-drain. Raise terminationGracePeriodSeconds to %d or more" (int .Values.terminationGracePeriodSeconds) (int .Values.preStopSleepSeconds) (int .Values.shutdownTimeoutSeconds) (int $min) (int $min)) }}
{{- end }}
{{- $cfg := .Values.config | default dict }}
{{- range $section, $keys := dict "http" (list "addr" "shutdown_timeout") "grpc" (list "addr") "store" (list "driver" "dsn" "fallback_dsns" "migrate") "admin" (list "token") "segment" (list "opaque_key") }}
{{- $s := get $cfg $section | default dict }}
{{- range $keys }}
{{- if hasKey $s . }}
{{- fail (printf "config.%s.%s is set by the chart: use %s instead" $section . (get (dict "addr" (ternary "service.port" "grpc.enabled and grpc.port" (eq $section "http")) "shutdown_timeout" "shutdownTimeoutSeconds" "driver" "store.driver" "dsn" "store.dsn or existingSecret" "fallback_dsns" "store.fallbackDsns or existingSecret" "migrate" "migration.enabled" "token" "adminToken or existingSecret" "opaque_key" "opaqueKey or existingSecret") .)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $sf := get $cfg "snowflake" | default dict }}
{{- if and (hasKey $sf "worker_id") (ne (lower (toString $sf.worker_id)) "auto") (gt (int .Values.replicaCount) 1) }}
{{- fail "config.snowflake.worker_id is a fixed number with more than one replica: every pod would use the same worker id. Keep it auto (each pod leases its own)" }}
{{- end }}
{{- end }}

{{/* config.yaml: config with the keys the chart owns. */}}
{{- define "leafd.config" -}}
{{- $own := dict
  "http" (dict "addr" (include "leafd.httpAddr" .) "shutdown_timeout" (printf "%ds" (int .Values.shutdownTimeoutSeconds)))
  "store" (dict "driver" .Values.store.driver "migrate" (not (include "leafd.migrationJob" .)))
}}
{{- if .Values.grpc.enabled }}
{{- $_ := set $own "grpc" (dict "addr" (printf "0.0.0.0:%d" (int .Values.grpc.port))) }}
{{- end }}
{{- toYaml (mustMergeOverwrite (deepCopy (.Values.config | default dict)) $own) }}
{{- end }}

{{- define "leafd.httpAddr" -}}
{{- printf "0.0.0.0:%d" (int .Values.service.port) }}
{{- end }}

{{/*
The image's ENV again, with the chart's values: the Dockerfile sets
LEAFD_HTTP_ADDR and LEAFD_LOG_FORMAT, and leafd's environment outranks
config.yaml, so without these the pod would listen on 8080 and log JSON
whatever service.port and config.log.format say.
*/}}
{{- define "leafd.imageEnv" -}}
- name: LEAFD_HTTP_ADDR
  value: {{ include "leafd.httpAddr" . | quote }}
- name: LEAFD_LOG_FORMAT
  value: {{ dig "log" "format" "json" (.Values.config | default dict) | toString | quote }}
{{- end }}

{{/*
The environment from the Secret: the DSN and the tokens. Called with
(dict "root" $ "dsnKey" KEY): KEY is the Secret's key of the DSN, dsn for the
servers and migration.secretKey for the Job. The Job gets the tokens too:
leafd migrate loads the whole configuration, and admin.protect_dashboard,
for one, needs admin.token.
*/}}
{{- define "leafd.secretEnv" -}}
{{- $ := .root }}
{{- $secret := include "leafd.secretName" $ }}
{{- $external := $.Values.existingSecret }}
{{- if or (ne $.Values.store.driver "sqlite") $.Values.store.dsn }}
- name: LEAFD_STORE_DSN
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ .dsnKey }}
{{- end }}
{{- if and (or $external $.Values.store.fallbackDsns) (ne $.Values.store.driver "sqlite") }}
- name: LEAFD_STORE_FALLBACK_DSNS
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: fallback-dsns
      optional: true
{{- end }}
{{- if or $external $.Values.adminToken }}
- name: LEAFD_ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: admin-token
      {{- if $external }}
      optional: true
      {{- end }}
{{- end }}
{{- if or $external $.Values.opaqueKey }}
- name: LEAFD_SEGMENT_OPAQUE_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: opaque-key
      {{- if $external }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}
