{{/* Names: 63 characters at most (DNS labels), as Kubernetes requires. */}}
{{- define "sandboxd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sandboxd.fullname" -}}
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

{{- define "sandboxd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries (the recommended app.kubernetes.io set). */}}
{{- define "sandboxd.labels" -}}
helm.sh/chart: {{ include "sandboxd.chart" . }}
{{ include "sandboxd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sandboxd
{{- end -}}

{{/* Every pod of the release; the NetworkPolicy selects on these. */}}
{{- define "sandboxd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sandboxd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of one component: call with (dict "ctx" $ "component" "node"). */}}
{{- define "sandboxd.componentLabels" -}}
{{ include "sandboxd.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sandboxd.componentSelector" -}}
{{ include "sandboxd.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sandboxd.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "sandboxd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sandboxd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sandboxd.clusterSecretName" -}}
{{- default (printf "%s-cluster" (include "sandboxd.fullname" .)) .Values.fleet.existingSecret -}}
{{- end -}}

{{- define "sandboxd.clusterSecretKey" -}}
{{- if .Values.fleet.existingSecret -}}{{ .Values.fleet.existingSecretKey }}{{- else -}}cluster-secret{{- end -}}
{{- end -}}

{{/* The Secret holding the daemon's database URL (and, for db init, the owner's). */}}
{{- define "sandboxd.databaseSecretName" -}}
{{- default (printf "%s-database" (include "sandboxd.fullname" .)) .Values.postgresql.external.existingSecret -}}
{{- end -}}

{{- define "sandboxd.databaseUrlKey" -}}
{{- if .Values.postgresql.external.existingSecret -}}{{ .Values.postgresql.external.existingSecretUrlKey }}{{- else -}}database-url{{- end -}}
{{- end -}}

{{- define "sandboxd.ownerUrlKey" -}}
{{- if .Values.postgresql.external.existingSecret -}}{{ .Values.postgresql.external.existingSecretOwnerUrlKey }}{{- else -}}owner-url{{- end -}}
{{- end -}}

{{/* The bundled PostgreSQL's Service: the bitnami chart's fullname. */}}
{{- define "sandboxd.postgresqlHost" -}}
{{- if contains "postgresql" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-postgresql" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The two URLs when the chart writes them (external url values or bundled). */}}
{{- define "sandboxd.databaseUrl" -}}
{{- if .Values.postgresql.enabled -}}
{{- printf "postgresql://sandboxd_app:%s@%s:5432/%s" (required "postgresql.appPassword is required with the bundled PostgreSQL" .Values.postgresql.appPassword) (include "sandboxd.postgresqlHost" .) .Values.postgresql.auth.database -}}
{{- else -}}
{{- required "postgresql.external.url (or postgresql.external.existingSecret, or postgresql.enabled) is required: a fleet shares one PostgreSQL" .Values.postgresql.external.url -}}
{{- end -}}
{{- end -}}

{{- define "sandboxd.ownerUrl" -}}
{{- if .Values.postgresql.enabled -}}
{{- printf "postgresql://%s:%s@%s:5432/%s" .Values.postgresql.auth.username (required "postgresql.auth.password (the owner role's) is required with the bundled PostgreSQL" .Values.postgresql.auth.password) (include "sandboxd.postgresqlHost" .) .Values.postgresql.auth.database -}}
{{- else -}}
{{- required "postgresql.external.ownerUrl is required to run sandboxd db init (or set dbInit.enabled=false and run it yourself)" .Values.postgresql.external.ownerUrl -}}
{{- end -}}
{{- end -}}

{{/*
Environment every sandboxd pod shares: call with (dict "ctx" $ "nodeIdField"
"spec.nodeName" "slots" "…").  The node id comes from the downward API (a
sandbox node is its Kubernetes node; a control-plane pod is its pod name, as
two may share a node), the advertise URL from the pod's IP.
*/}}
{{- define "sandboxd.fleetEnv" -}}
{{- $ := .ctx -}}
- name: SANDBOXD_LISTEN
  value: {{ printf "0.0.0.0:%v" $.Values.apiPort | quote }}
- name: SANDBOXD_STATE_DIR
  value: /var/lib/sandboxd
- name: SANDBOXD_LOG_LEVEL
  value: {{ $.Values.logLevel | quote }}
- name: SANDBOXD_LOG_FORMAT
  value: json
- name: SANDBOXD_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "sandboxd.databaseSecretName" $ }}
      key: {{ include "sandboxd.databaseUrlKey" $ }}
- name: SANDBOXD_CLUSTER
  value: "1"
- name: SANDBOXD_NODE_ID
  valueFrom:
    fieldRef:
      fieldPath: {{ .nodeIdField }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: SANDBOXD_ADVERTISE
  value: {{ printf "http://$(POD_IP):%v" $.Values.apiPort | quote }}
- name: SANDBOXD_CLUSTER_SECRET_FILE
  value: /etc/sandboxd/cluster/secret
- name: SANDBOXD_PLACEMENT_K
  value: {{ $.Values.fleet.placementK | quote }}
{{- if ne (toString .slots) "" }}
- name: SANDBOXD_NODE_SLOTS
  value: {{ .slots | quote }}
{{- end }}
{{- end -}}

{{/* The cluster secret as a file (the daemon reads SANDBOXD_CLUSTER_SECRET_FILE). */}}
{{- define "sandboxd.clusterSecretVolume" -}}
- name: cluster-secret
  secret:
    secretName: {{ include "sandboxd.clusterSecretName" . }}
    defaultMode: 256  # 0400, in decimal: YAML 1.1 and 1.2 read a leading 0 differently
    items:
      - key: {{ include "sandboxd.clusterSecretKey" . }}
        path: secret
{{- end -}}

{{- define "sandboxd.probes" -}}
readinessProbe:
  httpGet:
    path: /readyz
    port: api
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
livenessProbe:
  httpGet:
    path: /healthz
    port: api
  initialDelaySeconds: 5
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
{{- end -}}
