{{/*
Names, labels and small pieces shared by the templates.
*/}}

{{/* Chart name, overridable with nameOverride. */}}
{{- define "webserver-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name when it already contains the chart name, else "<release>-<chart>".
Truncated to leave room for the longest suffix the templates add ("-leader-election").
*/}}
{{- define "webserver-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 47 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 47 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 47 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "webserver-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of the operator pods: stable across upgrades (Deployment selectors are immutable). */}}
{{- define "webserver-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "webserver-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{/* Labels on every object the chart creates (component is set per object). */}}
{{- define "webserver-operator.labels" -}}
helm.sh/chart: {{ include "webserver-operator.chart" . }}
app.kubernetes.io/name: {{ include "webserver-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: webserver-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the operator runs as. */}}
{{- define "webserver-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "webserver-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator image's name: global.imageRegistry (else image.registry) + "/" + image.repository, unless the
repository already starts with a registry host (its first component holds a dot or a port, or is localhost), as
Docker reads a name; then the repository alone. */}}
{{- define "webserver-operator.imageName" -}}
{{- $registry := .Values.image.registry | default "" }}
{{- with .Values.global }}{{ with .imageRegistry }}{{ $registry = . }}{{ end }}{{ end }}
{{- $repository := .Values.image.repository }}
{{- $first := first (splitList "/" $repository) }}
{{- $hasHost := and (contains "/" $repository) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) }}
{{- if or $hasHost (not $registry) }}
{{- $repository }}
{{- else }}
{{- printf "%s/%s" (trimSuffix "/" $registry) $repository }}
{{- end }}
{{- end }}

{{/* The operator image: name@digest when a digest is given, else name:tag (default appVersion). */}}
{{- define "webserver-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" (include "webserver-operator.imageName" .) .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" (include "webserver-operator.imageName" .) (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* "true" when /metrics serves cert-manager's certificate (metrics enabled, secure, certManager enabled), else "". */}}
{{- define "webserver-operator.metricsCertManager" -}}
{{- if and .Values.metrics.enabled .Values.metrics.secure .Values.metrics.certManager.enabled }}true{{ end }}
{{- end }}

{{/* Where the metrics certificate Secret is mounted (--metrics-cert-path). */}}
{{- define "webserver-operator.metricsCertDir" -}}
/etc/webserver-operator/metrics-certs
{{- end }}

{{/* DNS name of the metrics Service: the certificate's name, and the server name the ServiceMonitor verifies. */}}
{{- define "webserver-operator.metricsServiceHost" -}}
{{ include "webserver-operator.fullname" . }}-metrics.{{ .Release.Namespace }}.svc
{{- end }}

{{/*
"true" when the WebServers are split into shards (sharding.shards > 1), else "". Sharded, every replica reconciles
its share of the shards: the leader election Role covers the shard and member Leases, and the pods get a
PodDisruptionBudget and a spread over nodes.
*/}}
{{- define "webserver-operator.sharded" -}}
{{- if gt (int .Values.sharding.shards) 1 }}true{{ end }}
{{- end }}

{{/* Name of the leader election Lease (and of the Role that may touch it). */}}
{{- define "webserver-operator.leaseName" -}}
{{- default (printf "%s-leader" (include "webserver-operator.fullname" .)) .Values.leaderElection.id }}
{{- end }}

{{/*
The rules the operator needs on WebServers and their children: exactly the verbs it uses, nothing else (no
delete: children go away by garbage collection; no secrets, no pods). Used by the ClusterRole and, when
watchNamespaces is set, by one Role per watched namespace.
*/}}
{{- define "webserver-operator.managerRules" -}}
- apiGroups: ["web.webserver-operator.dev"]
  resources: ["webservers"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["web.webserver-operator.dev"]
  resources: ["webservers/status"]
  verbs: ["update"]
# Setting blockOwnerDeletion on the children's ownerReferences needs update on the owner's finalizers
# subresource where the OwnerReferencesPermissionEnforcement admission plugin is on.
- apiGroups: ["web.webserver-operator.dev"]
  resources: ["webservers/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch"]
# A WebServer with two or more replicas has a budget; below two it is deleted (only the operator's own, by uid).
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Events are created (each with generateName); a repeat of the same Event patches its count and lastTimestamp.
# Listed (the kubelet's Unhealthy Events of the namespace, by field selector) only while a WebServer's new pods stay
# unready, to say which probe fails and why.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list", "create", "patch"]
{{- end }}

{{/*
What people may do with WebServers, by role (the argument: viewer, editor or admin). Readers see WebServers, their
status and their scale; editors and admins also create, change, scale (the scale subresource, as `kubectl scale`
and HPAs do) and delete them. Status stays the operator's.
*/}}
{{- define "webserver-operator.userRules" -}}
- apiGroups: ["web.webserver-operator.dev"]
  resources: ["webservers", "webservers/status", "webservers/scale"]
  verbs: ["get", "list", "watch"]
{{- if ne . "viewer" }}
- apiGroups: ["web.webserver-operator.dev"]
  resources: ["webservers"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- apiGroups: ["web.webserver-operator.dev"]
  resources: ["webservers/scale"]
  verbs: ["update", "patch"]
{{- end }}
{{- end }}
