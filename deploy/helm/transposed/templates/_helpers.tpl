{{/* Names and labels shared by the templates. */}}
{{- define "transposed.fullname" -}}
{{- if eq .Release.Name .Chart.Name -}}
{{ .Release.Name }}
{{- else -}}
{{ printf "%s-%s" .Release.Name .Chart.Name }}
{{- end -}}
{{- end -}}

{{- define "transposed.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "transposed.labels" -}}
{{ include "transposed.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "transposed.redisUrl" -}}
{{- if .Values.sharedStore.url -}}
{{ .Values.sharedStore.url }}
{{- else -}}
{{ printf "redis://%s-redis.%s.svc.cluster.local:6379" (include "transposed.fullname" .) .Release.Namespace }}
{{- end -}}
{{- end -}}

{{/* The probe command under mutual TLS (the kubelet's grpc probe speaks plaintext only). */}}
{{- define "transposed.tlsProbe" -}}
exec:
  command:
    - transposectl
    - --server=localhost:{{ .Values.grpcPort }}
    - --tls-ca=/etc/transposed/tls/ca.crt
    - --tls-cert=/etc/transposed/tls/tls.crt
    - --tls-key=/etc/transposed/tls/tls.key
    - --tls-server-name={{ include "transposed.fullname" . }}-peers.{{ .Release.Namespace }}.svc.cluster.local
    - devices
{{- end -}}
