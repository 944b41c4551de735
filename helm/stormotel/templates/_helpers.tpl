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

{{/* <fullname>-<suffix> within 63 characters: the full name is cut, never the suffix, so two
     objects of one release never share a name however long the release name is. */}}
{{- define "stormotel.suffixed" -}}
{{- $max := sub 62 (len .suffix) | int -}}
{{- printf "%s-%s" (include "stormotel.fullname" .root | trunc $max | trimSuffix "-") .suffix -}}
{{- end -}}

{{/* Labels the Prometheus of kube-prometheus-stack selects PodMonitors, ServiceMonitors and
     PrometheusRules by (`release: <its release>`), plus the object's own extra labels. */}}
{{- define "stormotel.monitoringLabels" -}}
{{- $labels := merge (dict) (.extra | default dict) (.root.Values.prometheusSelectorLabels | default dict) -}}
{{- if $labels }}{{ toYaml $labels }}{{ end -}}
{{- end -}}

{{/* namespaceSelector: every namespace by default (training jobs rarely run in the monitoring
     namespace), or the listed ones. */}}
{{- define "stormotel.namespaceSelector" -}}
{{- if .namespaces -}}
matchNames:
  {{- toYaml .namespaces | nindent 2 }}
{{- else -}}
any: true
{{- end -}}
{{- end -}}

{{/* The rules file with per-alert switches applied: alerts listed under
     prometheusRule.alerts.<Name>.enabled=false are left out, prometheusRule.alertLabels and
     prometheusRule.alerts.<Name>.labels are added to the alerts' labels. */}}
{{- define "stormotel.rules" -}}
{{- $cfg := .Values.prometheusRule -}}
{{- $doc := .Files.Get (printf "%s/rules/stormotel-rules.yml" (include "stormotel.filesDir" .)) | fromYaml -}}
{{- $groups := list -}}
{{- range $g := $doc.groups -}}
{{- $rules := list -}}
{{- range $r := $g.rules -}}
{{- if $r.alert -}}
{{- $per := get ($cfg.alerts | default dict) $r.alert | default dict -}}
{{- if ne (toString (get $per "enabled")) "false" -}}
{{- $labels := merge (dict) ($per.labels | default dict) ($cfg.alertLabels | default dict) $r.labels -}}
{{- $rule := merge (dict "labels" $labels) (omit $r "labels") -}}
{{- if $.Values.receiver.enabled -}}
{{- /* Every alert links its job's report on the receiver (docs/serve.md): the same
       annotation `stormotel dashboards --report-base-url` writes. */ -}}
{{- $url := printf "%s%s/jobs/%s" "{{ if $labels.job_id }}" (include "stormotel.receiverUrl" $) "{{ $labels.job_id | urlquery }}/{{ end }}" -}}
{{- $_ := set $rule "annotations" (merge (dict "report_url" $url) $r.annotations) -}}
{{- end -}}
{{- $rules = append $rules $rule -}}
{{- end -}}
{{- else -}}
{{- $rules = append $rules $r -}}
{{- end -}}
{{- end -}}
{{- $groups = append $groups (dict "name" $g.name "rules" $rules) -}}
{{- end -}}
{{- toYaml (dict "groups" $groups) -}}
{{- end -}}

{{/* The receiver's Service name, and the URL people reach it at (receiver.publicUrl, else the
     Service's cluster DNS name). */}}
{{- define "stormotel.receiverName" -}}
{{- include "stormotel.suffixed" (dict "root" . "suffix" "receiver") -}}
{{- end -}}

{{- define "stormotel.receiverUrl" -}}
{{- if .Values.receiver.publicUrl -}}
{{- .Values.receiver.publicUrl | trimSuffix "/" -}}
{{- else -}}
{{- printf "http://%s.%s.svc:%v" (include "stormotel.receiverName" .) .Release.Namespace .Values.receiver.port -}}
{{- end -}}
{{- end -}}

{{/* Where the generated dashboards and rules for .Values.nameTranslation lie: files/ for
     Prometheus 3's default OTLP names (also the pull exporter's and a collector's), else
     files/name-translation/<Strategy>/ (docs/prometheus3.md). */}}
{{- define "stormotel.filesDir" -}}
{{- $s := .Values.nameTranslation | default "UnderscoreEscapingWithSuffixes" -}}
{{- if eq $s "UnderscoreEscapingWithSuffixes" -}}files{{- else -}}files/name-translation/{{ $s }}{{- end -}}
{{- end -}}
