{{/* The release's name for oneshot's objects, within Kubernetes' 63 characters. */}}
{{- define "oneshot.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object of the chart. */}}
{{- define "oneshot.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Labels that select the dispatcher's pods. */}}
{{- define "oneshot.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dispatcher
{{- end -}}

{{/* The image of the dispatcher and, unless a template names another, of build pods. */}}
{{- define "oneshot.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The ServiceAccount of build pods: no Role, no token. */}}
{{- define "oneshot.buildServiceAccount" -}}
{{- printf "%s-build" (include "oneshot.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The namespace of routes without their own. */}}
{{- define "oneshot.buildNamespace" -}}
{{- .Values.buildNamespace | default .Release.Namespace -}}
{{- end -}}

{{/* Every namespace a route's Jobs run in, one per line, sorted. */}}
{{- define "oneshot.buildNamespaces" -}}
{{- $all := list (include "oneshot.buildNamespace" .) -}}
{{- range .Values.routes -}}
{{- if and .namespace (eq (.cluster | default "home") "home") -}}{{- $all = append $all .namespace -}}{{- end -}}
{{- end -}}
{{- $all | uniq | sortAlpha | join "\n" -}}
{{- end -}}

{{/* The URL build pods reach the API at. */}}
{{- define "oneshot.publicUrl" -}}
{{- .Values.publicUrl | default (printf "http://%s.%s.svc:%v" (include "oneshot.fullname" .) .Release.Namespace .Values.service.port) -}}
{{- end -}}

{{/* The Secret holding the database URL. */}}
{{- define "oneshot.databaseSecret" -}}
{{- if .Values.database.url -}}
{{- printf "%s-database" (include "oneshot.fullname" .) -}}
{{- else -}}
{{- required "database: set database.existingSecret (a Secret with the database URL) or database.url" .Values.database.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the admin token. */}}
{{- define "oneshot.encryptionSecret" -}}
{{- .Values.encryption.existingSecret | default (printf "%s-encryption" (include "oneshot.fullname" .)) -}}
{{- end -}}

{{- define "oneshot.adminTokenSecret" -}}
{{- .Values.adminToken.existingSecret | default (printf "%s-admin-token" (include "oneshot.fullname" .)) -}}
{{- end -}}


{{/* The dispatcher's ServiceAccount: the chart's, or one the operator made. */}}
{{- define "oneshot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "oneshot.fullname" .) -}}
{{- else -}}
{{- required "serviceAccount.name: the ServiceAccount to run as when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The environment variable that carries a queue source's database URL into the dispatcher. */}}
{{- define "oneshot.sourceUrlEnv" -}}
ONESHOT_SOURCE_{{ . | upper | replace "-" "_" }}_URL
{{- end }}

{{/*
The PodDisruptionBudget API the cluster serves, as found by `helm install` and `upgrade`: policy/v1
(1.21 and later), policy/v1beta1 where that is all there is (1.20 and before); policy/v1 when no
cluster was asked (`helm template`; 1.25 and later no longer serve policy/v1beta1).
*/}}
{{- define "oneshot.pdbApiVersion" -}}
{{- if .Capabilities.APIVersions.Has "policy/v1/PodDisruptionBudget" -}}
policy/v1
{{- else if .Capabilities.APIVersions.Has "policy/v1beta1/PodDisruptionBudget" -}}
policy/v1beta1
{{- else -}}
policy/v1
{{- end -}}
{{- end -}}

{{/* The PriorityClass of balloons: the chart's (one per release and namespace: it is cluster-wide), or one the operator names. */}}
{{- define "oneshot.balloonPriorityClass" -}}
{{- if .Values.priorityClasses.create -}}
{{- printf "%s-%s-balloon" (include "oneshot.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- .Values.priorityClasses.balloonName | default "oneshot-balloon" -}}
{{- end -}}
{{- end -}}

{{/* The PriorityClass of build pods whose template names none (when the chart makes it). */}}
{{- define "oneshot.buildPriorityClass" -}}
{{- printf "%s-%s-build" (include "oneshot.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" -}}
{{- end -}}
