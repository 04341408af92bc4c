{{/* The objects' name: the release's, with "strait" unless it already holds it. */}}
{{- define "strait.fullname" -}}
{{- if contains "strait" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-strait" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "strait.selectorLabels" -}}
app.kubernetes.io/name: strait
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "strait.labels" -}}
{{ include "strait.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The ConfigMap holding strait.toml. */}}
{{- define "strait.configMap" -}}
{{- .Values.existingConfigMap | default (include "strait.fullname" .) -}}
{{- end -}}
