{{/* Names: the chart's, the release's (at most 63 characters, as a DNS label), and the chart label. */}}
{{- define "tessera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tessera.fullname" -}}
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

{{- define "tessera.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object; the selector labels of the server's pods (the migration Job's differ). */}}
{{- define "tessera.labels" -}}
helm.sh/chart: {{ include "tessera.chart" . }}
{{ include "tessera.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tessera.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tessera.serverSelectorLabels" -}}
{{ include "tessera.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{- define "tessera.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tessera.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tessera.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "tessera.postgresql" -}}
{{- if eq .Values.store.type "postgresql" }}true{{ end }}
{{- end }}

{{/*
The issuer: the value, else https://<first ingress host> (http:// when no TLS entry names it), else the
Service's address inside the cluster.
*/}}
{{- define "tessera.issuer" -}}
{{- if .Values.issuer }}
{{- .Values.issuer }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- $host := (first .Values.ingress.hosts).host }}
{{- $tls := false }}
{{- range .Values.ingress.tls }}
{{- if has $host (.hosts | default list) }}
{{- $tls = true }}
{{- end }}
{{- end }}
{{- printf "%s://%s" (ternary "https" "http" $tls) $host }}
{{- else }}
{{- printf "http://%s.%s.svc:%v" (include "tessera.fullname" .) .Release.Namespace .Values.service.port }}
{{- end }}
{{- end }}

{{/* Secret names: the existing one, else the chart's. */}}
{{- define "tessera.masterKeySecret" -}}
{{- .Values.masterKey.existingSecret | default (printf "%s-master-key" (include "tessera.fullname" .)) }}
{{- end }}

{{- define "tessera.bootstrapAdminSecret" -}}
{{- .Values.bootstrapAdmin.existingSecret | default (printf "%s-bootstrap-admin" (include "tessera.fullname" .)) }}
{{- end }}

{{/*
A value the chart generates once: the one already in the Secret (lookup), else a new one. On an upgrade
the Secret must be readable: when lookup sees neither it nor the release's Service, lookup is not
reaching the cluster (helm template --is-upgrade, a client-side dry run, no RBAC to read Secrets), and
rendering a new value would replace the one in use, so the chart stops.
Arguments: (list $ secretName key generator-value what)
*/}}
{{- define "tessera.generated" -}}
{{- $root := index . 0 }}
{{- $name := index . 1 }}
{{- $key := index . 2 }}
{{- $fresh := index . 3 }}
{{- $what := index . 4 }}
{{- $existing := lookup "v1" "Secret" $root.Release.Namespace $name }}
{{- if and $existing (hasKey ($existing.data | default dict) $key) }}
{{- index $existing.data $key }}
{{- else }}
{{- if $root.Release.IsUpgrade }}
{{- $service := lookup "v1" "Service" $root.Release.Namespace (include "tessera.fullname" $root) }}
{{- if not $service }}
{{- fail (printf "cannot read Secret %s to keep the %s it holds (lookup does not reach the cluster: use --dry-run=server, or set its existingSecret)" $name $what) }}
{{- end }}
{{- end }}
{{- $fresh | b64enc }}
{{- end }}
{{- end }}

{{/* Checks that span values and that the schema cannot express with a clear message. */}}
{{- define "tessera.validate" -}}
{{- $grace := .Values.terminationGracePeriodSeconds }}
{{- $drain := add .Values.shutdown.delay .Values.shutdown.timeout }}
{{- if and (not (kindIs "invalid" $grace)) (le (int $grace) (int $drain)) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed shutdown.delay + shutdown.timeout (%v)" $grace $drain) }}
{{- end }}
{{- if and .Values.autoscaling.enabled .Values.autoscaling.targetCPUUtilizationPercentage (not (dig "requests" "cpu" "" .Values.resources)) }}
{{- fail "autoscaling.targetCPUUtilizationPercentage needs resources.requests.cpu" }}
{{- end }}
{{- if and .Values.autoscaling.enabled .Values.autoscaling.targetMemoryUtilizationPercentage (not (dig "requests" "memory" "" .Values.resources)) }}
{{- fail "autoscaling.targetMemoryUtilizationPercentage needs resources.requests.memory" }}
{{- end }}
{{- end }}

{{- define "tessera.terminationGracePeriodSeconds" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add .Values.shutdown.delay .Values.shutdown.timeout 15 }}
{{- else }}
{{- .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* The hardening of every pod and container: non-root, read-only root, nothing to escalate to. */}}
{{- define "tessera.podSecurityContext" -}}
runAsNonRoot: true
{{- with .Values.securityContext.runAsUser }}
runAsUser: {{ . }}
{{- end }}
{{- with .Values.securityContext.runAsGroup }}
runAsGroup: {{ . }}
{{- end }}
{{- with .Values.securityContext.fsGroup }}
fsGroup: {{ . }}
fsGroupChangePolicy: OnRootMismatch
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "tessera.containerSecurityContext" -}}
runAsNonRoot: true
{{- with .Values.securityContext.runAsUser }}
runAsUser: {{ . }}
{{- end }}
{{- with .Values.securityContext.runAsGroup }}
runAsGroup: {{ . }}
{{- end }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Where each secret is mounted; the settings name the files, never the values. */}}
{{- define "tessera.paths" -}}
masterKey: /etc/tessera/secrets/master-key/master-key
database: /etc/tessera/secrets/database/url
redis: /etc/tessera/secrets/redis/url
bootstrapAdmin: /etc/tessera/secrets/bootstrap-admin/client-secret
config: /etc/tessera/config
configSecrets: /etc/tessera/client-secrets
otelHeaders: /etc/tessera/secrets/otel-headers/headers
{{- end }}

{{/* The settings of the migration Job and of the server (the server adds its own). */}}
{{- define "tessera.commonEnv" -}}
{{- $paths := include "tessera.paths" . | fromYaml -}}
- name: NODE_ENV
  value: production
- name: TESSERA_DATA_DIR
  value: /data
- name: TESSERA_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- if include "tessera.postgresql" . }}
- name: TESSERA_DATABASE_URL_FILE
  value: {{ $paths.database }}
{{- end }}
{{- end }}

{{/* The user's own settings, after the chart's. */}}
{{- define "tessera.userEnv" -}}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "tessera.serverEnv" -}}
{{- $paths := include "tessera.paths" . | fromYaml -}}
- name: TESSERA_PORT
  value: {{ .Values.port | quote }}
- name: TESSERA_HOST
  value: 0.0.0.0
- name: TESSERA_ISSUER
  value: {{ include "tessera.issuer" . | quote }}
- name: TESSERA_MASTER_KEY_FILE
  value: {{ $paths.masterKey }}
{{- if .Values.redis.existingSecret }}
- name: TESSERA_REDIS_URL_FILE
  value: {{ $paths.redis }}
{{- end }}
{{- with .Values.redis.prefix }}
- name: TESSERA_REDIS_PREFIX
  value: {{ . | quote }}
{{- end }}
- name: TESSERA_TOKEN_TTL
  value: {{ .Values.tokenTtl | quote }}
{{- with .Values.trustProxy }}
- name: TESSERA_TRUST_PROXY
  value: {{ join "," . | quote }}
{{- end }}
- name: TESSERA_METRICS
  value: {{ .Values.metrics | quote }}
- name: TESSERA_SHUTDOWN_DELAY
  value: {{ .Values.shutdown.delay | quote }}
- name: TESSERA_SHUTDOWN_TIMEOUT
  value: {{ .Values.shutdown.timeout | quote }}
{{- if .Values.bootstrapAdmin.enabled }}
- name: TESSERA_BOOTSTRAP_ADMIN_CLIENT_ID
  value: {{ .Values.bootstrapAdmin.clientId | quote }}
- name: TESSERA_BOOTSTRAP_ADMIN_CLIENT_SECRET_FILE
  value: {{ $paths.bootstrapAdmin }}
{{- end }}
{{- if .Values.config }}
- name: TESSERA_APPLY_FILE
  value: {{ $paths.config }}/tessera.yaml
- name: TESSERA_APPLY_PRUNE
  value: {{ .Values.configPrune | quote }}
{{- end }}
{{- with .Values.otel }}
{{- with .endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .protocol }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ . | quote }}
{{- end }}
{{- with .sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ . | quote }}
{{- end }}
{{- if ne (toString .samplerArg) "" }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .samplerArg | toString | quote }}
{{- end }}
{{- with .serviceName }}
- name: OTEL_SERVICE_NAME
  value: {{ . | quote }}
{{- end }}
{{- with .resourceAttributes }}
{{- $pairs := list }}
{{- range $key, $value := . }}
{{- $pairs = append $pairs (printf "%s=%v" $key $value) }}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $pairs | quote }}
{{- end }}
{{- if .headers.existingSecret }}
- name: OTEL_EXPORTER_OTLP_HEADERS_FILE
  value: {{ (include "tessera.paths" $ | fromYaml).otelHeaders }}
{{- end }}
- name: TESSERA_OTEL_TRUST_REMOTE
  value: {{ .trustRemote | quote }}
{{- end }}
{{- end }}

{{/* The volume of the PostgreSQL URL (the migration Job's and the server's). */}}
{{- define "tessera.databaseVolume" -}}
- name: database-url
  secret:
    secretName: {{ .Values.store.postgresql.existingSecret }}
    defaultMode: 288 # 0440
    items:
      - key: {{ .Values.store.postgresql.secretKey }}
        path: url
{{- end }}
