{{/* Names and labels. */}}
{{- define "mostrador.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mostrador.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "mostrador.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mostrador.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The image of `mostrador dockerfile`: the binary, Python and the graphs' langgraph.json. */}}
{{- define "mostrador.pythonImage" -}}
{{ required "python.image.repository is required with python.enabled" .Values.python.image.repository }}:{{ required "python.image.tag is required with python.enabled" .Values.python.image.tag }}
{{- end -}}

{{/* The Python graphs: the api reads their ids, the workers run them. */}}
{{- define "mostrador.pythonEnv" -}}
- name: MOSTRADOR_LANGGRAPH_CONFIG
  value: {{ .Values.python.config | quote }}
- name: MOSTRADOR_PYTHON
  value: {{ .Values.python.interpreter | quote }}
{{- with .Values.python.memoryLimitMiB }}
- name: MOSTRADOR_PYTHON_MEMORY_LIMIT_MIB
  value: {{ . | quote }}
{{- end }}
- name: MOSTRADOR_PYTHON_ISOLATION
  value: {{ .Values.python.isolation | default "shared" | quote }}
{{- if eq .Values.python.fork false }}
- name: MOSTRADOR_PYTHON_NO_FORK
  value: "true"
{{- end }}
{{- with .Values.python.processes }}
- name: MOSTRADOR_PYTHON_PROCESSES
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The pod-level settings every pod shares: non-root, no service-account token. */}}
{{- define "mostrador.podSpec" -}}
automountServiceAccountToken: false
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The container-level settings: read-only root filesystem, no privilege, no capability. */}}
{{- define "mostrador.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end -}}

{{/* The runtime role's database URL, by reference. */}}
{{- define "mostrador.databaseEnv" -}}
- name: MOSTRADOR_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.secretName }}
      key: {{ .Values.database.urlKey }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The model, for workers: the offline model when no base URL is set. */}}
{{- define "mostrador.modelEnv" -}}
{{- if .Values.model.baseUrl }}
- name: MODEL_BASE_URL
  value: {{ .Values.model.baseUrl | quote }}
- name: MODEL_NAME
  value: {{ .Values.model.name | quote }}
- name: MODEL_CONTEXT_WINDOW
  value: {{ required "model.contextWindow is required with model.baseUrl" .Values.model.contextWindow | quote }}
{{- if .Values.model.apiKeySecret.name }}
- name: MODEL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.model.apiKeySecret.name }}
      key: {{ .Values.model.apiKeySecret.key }}
{{- end }}
{{- end }}
{{- end -}}

{{/* A writable /tmp on a read-only root filesystem. */}}
{{- define "mostrador.tmpVolume" -}}
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
{{- end -}}
{{- define "mostrador.tmpMount" -}}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end -}}
