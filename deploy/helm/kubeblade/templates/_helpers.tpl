{{/* Chart name, overridable. */}}
{{- define "kubeblade.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name. */}}
{{- define "kubeblade.fullname" -}}
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

{{/* Labels of every object. */}}
{{- define "kubeblade.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "kubeblade.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubeblade
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of the operator pods. */}}
{{- define "kubeblade.operatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "kubeblade.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/*
Selector of the agent pods. The operator labels every agent DaemonSet's pods
app.kubernetes.io/name=kubeblade, component=agent (instance = the BladeConfig).
*/}}
{{- define "kubeblade.agentSelectorLabels" -}}
app.kubernetes.io/name: kubeblade
app.kubernetes.io/component: agent
{{- end }}

{{- define "kubeblade.operatorName" -}}
{{- printf "%s-operator" (include "kubeblade.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubeblade.operatorServiceAccountName" -}}
{{- default (include "kubeblade.operatorName" .) .Values.operator.serviceAccount.name }}
{{- end }}

{{/* Fixed: the operator's DaemonSets and the admission policy refer to it. */}}
{{- define "kubeblade.agentServiceAccountName" -}}
kubeblade-agent
{{- end }}

{{- define "kubeblade.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Repositories agent images may come from, comma-separated: the chart's own
image and agentImages.allowedRepositories. The schema limits them to
[a-z0-9._/:-], so they can be written into the admission policy's CEL.
*/}}
{{- define "kubeblade.allowedAgentRepositories" -}}
{{- $r := list .Values.image.repository }}
{{- range .Values.agentImages.allowedRepositories }}
{{- $r = append $r . }}
{{- end }}
{{- join "," (uniq $r) }}
{{- end }}

{{/* The same list as a CEL list literal, for the admission policy. */}}
{{- define "kubeblade.allowedAgentRepositoriesCEL" -}}
[{{ range $i, $r := splitList "," (include "kubeblade.allowedAgentRepositories" .) }}{{ if $i }}, {{ end }}{{ squote $r }}{{ end }}]
{{- end }}
