{{/*
Chart name (or nameOverride), at most 63 characters.
*/}}
{{- define "portico.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the chart's resources: fullnameOverride, else the release name when it already
contains the chart name, else <release>-<name>. At most 63 characters (a DNS label).
*/}}
{{- define "portico.fullname" -}}
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

{{/*
Chart label value: name-version.
*/}}
{{- define "portico.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels of the controller's pods. `app.kubernetes.io/name=portico-controller` is how
`porticoctl controller log` finds them.
*/}}
{{- define "portico.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-controller" (include "portico.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of every resource: selector labels, chart and version, then commonLabels (which may
add labels, not replace the selector ones).
*/}}
{{- define "portico.labels" -}}
{{- $labels := dict -}}
{{- range $k, $v := .Values.commonLabels }}{{ $_ := set $labels $k ($v | toString) }}{{ end -}}
{{- $_ := set $labels "helm.sh/chart" (include "portico.chart" .) -}}
{{- $_ := set $labels "app.kubernetes.io/name" (printf "%s-controller" (include "portico.name" .) | trunc 63 | trimSuffix "-") -}}
{{- $_ := set $labels "app.kubernetes.io/instance" .Release.Name -}}
{{- $_ := set $labels "app.kubernetes.io/part-of" "portico" -}}
{{- $_ := set $labels "app.kubernetes.io/component" "controller" -}}
{{- $_ := set $labels "app.kubernetes.io/version" (.Chart.AppVersion | toString) -}}
{{- $_ := set $labels "app.kubernetes.io/managed-by" .Release.Service -}}
{{- toYaml $labels }}
{{- end }}

{{/*
Labels with extra ones merged in (commonLabels and the chart's win on a clash of keys):
  include "portico.labelsWith" (list . .Values.some.extraLabels)
*/}}
{{- define "portico.labelsWith" -}}
{{- $root := index . 0 -}}
{{- $labels := include "portico.labels" $root | fromYaml -}}
{{- $extra := index . 1 | default dict -}}
{{- $merged := dict -}}
{{- range $k, $v := $extra }}{{ $_ := set $merged $k ($v | toString) }}{{ end -}}
{{- range $k, $v := $labels }}{{ $_ := set $merged $k $v }}{{ end -}}
{{- toYaml $merged }}
{{- end }}

{{/*
Name of the controller's ServiceAccount.
*/}}
{{- define "portico.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "portico.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
registry/repository:tag, from a component's image values with the global image.* as
fallbacks and the chart's appVersion as the last resort for the tag.
  include "portico.image" (list . .Values.controller.image)
*/}}
{{- define "portico.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $registry := $image.registry | default $root.Values.image.registry -}}
{{- $tag := $image.tag | default $root.Values.image.tag | default $root.Chart.AppVersion | toString -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) $image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" $image.repository $tag -}}
{{- end -}}
{{- end }}

{{/*
The Secret with the xDS CA.
*/}}
{{- define "portico.xdsTlsSecret" -}}
{{- .Values.controller.xdsServer.tlsSecretName | default (printf "%s-xds-ca" (include "portico.fullname" .) | trunc 63 | trimSuffix "-") }}
{{- end }}

{{/*
Names of the RBAC objects: cluster-scoped, so they carry the release namespace.
*/}}
{{- define "portico.clusterRoleName" -}}
{{- printf "%s-%s" (include "portico.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}
