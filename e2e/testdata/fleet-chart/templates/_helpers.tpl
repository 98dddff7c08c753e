{{/*
The Deployments and Services that Fleet's chart (rancher/fleet charts/fleet)
renders for its three controllers with its default values, written for the
e2e tests: one set for the unsharded controllers (shard ID "") and one per
static shard.
*/}}

{{- define "fixture.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* Every shard, the unsharded one first, each ID once. */}}
{{- define "fixture.shards" -}}
{{- $out := list (dict "id" "" "nodeSelector" dict) -}}
{{- $seen := list -}}
{{- range .Values.shards -}}
{{- if not (has .id $seen) -}}
{{- $out = append $out . -}}
{{- $seen = append $seen .id -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The pod labels of controller .app for shard .id. */}}
{{- define "fixture.podLabels" -}}
app: {{ .app | quote }}
fleet.cattle.io/shard-id: {{ .id | quote }}
{{- if not .id }}
fleet.cattle.io/shard-default: "true"
{{- end }}
{{- end -}}

{{/* The leader-election settings every Fleet container gets. */}}
{{- define "fixture.electionEnv" -}}
- name: CATTLE_ELECTION_LEASE_DURATION
  value: 30s
- name: CATTLE_ELECTION_RETRY_PERIOD
  value: 10s
- name: CATTLE_ELECTION_RENEW_DEADLINE
  value: 25s
{{- end -}}

{{- define "fixture.namespaceEnv" -}}
- name: NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{- define "fixture.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  privileged: false
  capabilities:
    drop: [ALL]
{{- end -}}

{{/* What every controller pod has besides its containers, for shard .shard. */}}
{{- define "fixture.podCommon" -}}
volumes:
  - name: tmp
    emptyDir: {}
nodeSelector:
  kubernetes.io/os: linux
  {{- range $k, $v := .shard.nodeSelector }}
  {{ $k }}: {{ $v | quote }}
  {{- end }}
tolerations:
  - key: cattle.io/os
    operator: Equal
    value: linux
    effect: NoSchedule
securityContext:
  runAsNonRoot: true
  runAsUser: 1000
  runAsGroup: 1000
{{- end -}}

{{/* The metrics port of a controller container. */}}
{{- define "fixture.metricsPort" -}}
{{- if .root.Values.metrics.enabled }}
ports:
  - containerPort: {{ .port }}
    name: metrics
{{- end }}
{{- end -}}
