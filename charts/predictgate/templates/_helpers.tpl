{{/* Names, labels and shared snippets of the predictgate chart. */}}

{{- define "predictgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "predictgate.fullname" -}}
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

{{/* Name of a component's objects: FULLNAME-controller, FULLNAME-gateway. */}}
{{- define "predictgate.componentName" -}}
{{- printf "%s-%s" (include "predictgate.fullname" .root | trunc 52 | trimSuffix "-") .component }}
{{- end }}

{{- define "predictgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "predictgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: predictgate
{{- end }}

{{- define "predictgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "predictgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of a component: call with (dict "root" $ "component" "gateway"). */}}
{{- define "predictgate.componentLabels" -}}
{{ include "predictgate.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "predictgate.componentSelector" -}}
{{ include "predictgate.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "predictgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Environment both components share. */}}
{{- define "predictgate.commonEnv" -}}
- name: HOST
  value: "0.0.0.0"
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: ENDPOINT_DOMAIN
  value: {{ .Values.endpointDomain | quote }}
- name: WATCH_NAMESPACES
  value: {{ join "," .Values.watchNamespaces | quote }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- /* The controller's request autoscaler reads each gateway replica's demand, found through this Service's EndpointSlices; each gateway counts the replicas there to admit its share of every model's maxConcurrency. */}}
- name: GATEWAY_SERVICE
  value: {{ printf "%s/%s" .Release.Namespace (include "predictgate.componentName" (dict "root" . "component" "gateway")) | quote }}
{{- end }}

{{/* Pod-level settings both components share. */}}
{{- define "predictgate.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
volumes:
  - name: tmp
    emptyDir: {}
{{- end }}

{{/*
NODE_OPTIONS of a component (call with its values): its nodeOptions, with
--max-old-space-size-percentage=heapPercent appended, so that V8's old generation is sized from the
container's memory limit (Node reads it from the cgroup at start). Not appended when heapPercent is 0
or nodeOptions sizes the old generation itself.
*/}}
{{- define "predictgate.nodeOptions" -}}
{{- $options := .nodeOptions | default "" }}
{{- if and (gt (int .heapPercent) 0) (not (regexMatch "--max[-_]old[-_]space[-_]size" $options)) }}
{{- $options = printf "%s --max-old-space-size-percentage=%d" $options (int .heapPercent) | trim }}
{{- end }}
{{- $options }}
{{- end }}
