{{/* Name of the chart (nameOverride wins). */}}
{{- define "burnqed.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object of the chart. */}}
{{- define "burnqed.labels" -}}
app.kubernetes.io/name: {{ include "burnqed.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: burnqed
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
One TOML value: strings and keys as JSON strings (valid TOML basic strings), integral numbers as integers (Helm
reads every number in values as a float), lists as arrays, maps as inline tables.
*/}}
{{- define "burnqed.tomlValue" -}}
{{- $v := . -}}
{{- if kindIs "string" $v -}}{{ toJson $v }}
{{- else if kindIs "bool" $v -}}{{ $v }}
{{- else if or (kindIs "float64" $v) (kindIs "int" $v) (kindIs "int64" $v) -}}
{{- if eq (float64 $v) (float64 (int64 $v)) }}{{ int64 $v }}{{ else }}{{ $v }}{{ end -}}
{{- else if kindIs "slice" $v -}}
[{{ range $i, $item := $v }}{{ if $i }}, {{ end }}{{ include "burnqed.tomlValue" $item }}{{ end }}]
{{- else if kindIs "map" $v -}}
{ {{- range $i, $key := keys $v | sortAlpha }}{{ if $i }},{{ end }} {{ toJson $key }} = {{ include "burnqed.tomlValue" (index $v $key) }}{{ end }} }
{{- else -}}
{{- fail (printf "config.values: a %s cannot be written as TOML" (kindOf $v)) -}}
{{- end -}}
{{- end -}}

{{/* burnqed.toml from config.values: one [section] per top-level key (docs/architecture.md, "Configuration"). */}}
{{- define "burnqed.toml" -}}
{{- range $section := keys . | sortAlpha }}
{{- $body := index $ $section }}
{{- if not (kindIs "map" $body) }}{{ fail (printf "config.values.%s must be a map (a config section)" $section) }}{{ end }}
[{{ $section }}]
{{- range $key := keys $body | sortAlpha }}
{{ toJson $key }} = {{ include "burnqed.tomlValue" (index $body $key) }}
{{- end }}
{{ end }}
{{- end -}}
