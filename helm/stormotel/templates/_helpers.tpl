{{/* Chart name, truncated to the 63 characters Kubernetes names allow. */}}
{{- define "stormotel.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full release name: <release>-<chart> unless the release already contains the chart name. */}}
{{- define "stormotel.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "stormotel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "stormotel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "stormotel.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "stormotel.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "stormotel.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "stormotel.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "stormotel.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* A DNS-1123 name for one analysed job's CronJob: <fullname>-<job slug>-<hash>, at most 52
     characters (CronJob names leave room for the Job suffix); the hash keeps job ids that
     differ only in dropped characters apart. */}}
{{- define "stormotel.cronjobName" -}}
{{- $slug := regexReplaceAll "[^a-z0-9-]+" (lower .jobId) "-" | trimAll "-" -}}
{{- $prefix := printf "%s-%s" (include "stormotel.fullname" .root) $slug | trunc 43 | trimSuffix "-" -}}
{{- printf "%s-%s" $prefix (sha256sum .jobId | trunc 8) -}}
{{- end -}}
