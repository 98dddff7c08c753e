{{/*
The chart name, or nameOverride.
*/}}
{{- define "shardkeeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The full name of the objects: fullnameOverride, else the release name,
suffixed with the chart name unless the release name contains it.
*/}}
{{- define "shardkeeper.fullname" -}}
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

{{/*
The helm.sh/chart label value.
*/}}
{{- define "shardkeeper.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The labels every object carries.
*/}}
{{- define "shardkeeper.labels" -}}
helm.sh/chart: {{ include "shardkeeper.chart" . }}
{{ include "shardkeeper.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: shardkeeper
{{- end -}}

{{/*
The labels that select the daemon's pods.
*/}}
{{- define "shardkeeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shardkeeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The daemon's ServiceAccount.
*/}}
{{- define "shardkeeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "shardkeeper.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The daemon's image.
*/}}
{{- define "shardkeeper.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The --preset value: "fleet", "flux", "fleet,flux" or "".
*/}}
{{- define "shardkeeper.presets" -}}
{{- $p := list -}}
{{- if .Values.presets.fleet.enabled }}{{ $p = append $p "fleet" }}{{ end -}}
{{- if .Values.presets.flux.enabled }}{{ $p = append $p "flux" }}{{ end -}}
{{- join "," $p -}}
{{- end -}}

{{/*
The namespaces whose Deployments the daemon clones and writes, as a JSON
list without duplicates: the enabled presets' namespaces and the namespaces
of extraSources.
*/}}
{{- define "shardkeeper.deploymentNamespaces" -}}
{{- $ns := list -}}
{{- if .Values.presets.fleet.enabled }}{{ $ns = append $ns .Values.presets.fleet.namespace }}{{ end -}}
{{- if .Values.presets.flux.enabled }}{{ $ns = append $ns .Values.presets.flux.namespace }}{{ end -}}
{{- range .Values.extraSources -}}
{{- $ns = append $ns (regexReplaceAll "^([^/]+)/.*$" . "${1}") -}}
{{- end -}}
{{- $ns | uniq | toJson -}}
{{- end -}}

{{/*
The objects the daemon counts per shard, as a JSON map from API group to
the sorted list of resources: the presets' kinds, or mappedKinds when set.
*/}}
{{- define "shardkeeper.mappedResources" -}}
{{- $groups := dict -}}
{{- if .Values.mappedKinds -}}
{{- range .Values.mappedKinds -}}
{{- $parts := regexSplit "\\." (regexReplaceAll "=.*$" . "") 3 -}}
{{- $group := index $parts 2 -}}
{{- $_ := set $groups $group (append (get $groups $group | default list) (index $parts 0)) -}}
{{- end -}}
{{- else -}}
{{- if .Values.presets.fleet.enabled -}}
{{- $_ := set $groups "fleet.cattle.io" (list "gitrepos" "helmops") -}}
{{- end -}}
{{- if .Values.presets.flux.enabled -}}
{{- $_ := set $groups "helm.toolkit.fluxcd.io" (list "helmreleases") -}}
{{- end -}}
{{- end -}}
{{- $out := dict -}}
{{- range $group, $resources := $groups -}}
{{- $_ := set $out $group ($resources | uniq | sortAlpha) -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}

{{/*
The shard IDs of .Values.shards as a JSON list, failing on an invalid ID, a
duplicate, an unknown per-shard field or more than 500 shards. The schema
checks the same for the plain forms; this also covers a YAML list given as
one string (as the Rancher form gives it).
*/}}
{{- define "shardkeeper.shardIDs" -}}
{{- $v := .Values.shards -}}
{{- $items := list -}}
{{- if kindIs "string" $v -}}
{{- $s := trim $v -}}
{{- if or (hasPrefix "-" $s) (hasPrefix "[" $s) -}}
{{- $items = fromYamlArray $s -}}
{{- if and (eq (len $items) 1) (kindIs "string" (index $items 0)) (hasPrefix "error " (index $items 0)) -}}
{{- fail (printf "shards: not a valid YAML list of shard IDs and shard objects: %s" (index $items 0)) -}}
{{- end -}}
{{- else if $s -}}
{{- $items = regexSplit "[\\s,]+" $s -1 | compact -}}
{{- end -}}
{{- else if kindIs "slice" $v -}}
{{- $items = $v -}}
{{- else if not (kindIs "invalid" $v) -}}
{{- $items = list (toString $v) -}}
{{- end -}}
{{- $ids := list -}}
{{- $allowed := list "id" "nodeSelector" "tolerations" "resources" "replicas" -}}
{{- range $i, $item := $items -}}
{{- $id := $item -}}
{{- if kindIs "map" $item -}}
{{- range $k, $_ := $item -}}
{{- if not (has $k $allowed) -}}
{{- fail (printf "shards[%d]: unknown field %q; a shard may set only id, nodeSelector, tolerations, resources and replicas" $i $k) -}}
{{- end -}}
{{- end -}}
{{- $id = $item.id -}}
{{- end -}}
{{- if not (kindIs "string" $id) -}}
{{- fail (printf "shards[%d]: %v is not a shard ID (nor an object with an id); write IDs as strings" $i $item) -}}
{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$" $id) -}}
{{- fail (printf "shards[%d]: %q is not a valid shard ID: use 1 to 40 lower-case letters, digits and '-', starting and ending with a letter or digit" $i $id) -}}
{{- end -}}
{{- if has $id $ids -}}
{{- fail (printf "shards[%d]: shard %q is listed twice" $i $id) -}}
{{- end -}}
{{- $ids = append $ids $id -}}
{{- end -}}
{{- if gt (len $ids) 500 -}}
{{- fail (printf "shards: %d shards listed, at most 500 are allowed" (len $ids)) -}}
{{- end -}}
{{- $ids | toJson -}}
{{- end -}}

{{/*
The value for data.shards rendered from .Values.shards: the string as given,
IDs of a plain list joined by commas, a list with shard objects as YAML, and
"[]" (no shards) for an empty value.
*/}}
{{- define "shardkeeper.shardsValue" -}}
{{- $v := .Values.shards -}}
{{- $ids := include "shardkeeper.shardIDs" . | fromJsonArray -}}
{{- if not $ids -}}
[]
{{- else if kindIs "slice" $v -}}
{{- $plain := true -}}
{{- range $v }}{{ if not (kindIs "string" .) }}{{ $plain = false }}{{ end }}{{ end -}}
{{- if $plain -}}
{{- join "," $v -}}
{{- else -}}
{{- toYaml $v -}}
{{- end -}}
{{- else -}}
{{- toString $v | trim -}}
{{- end -}}
{{- end -}}

{{/*
Checks of the values that the schema cannot express.
*/}}
{{- define "shardkeeper.validate" -}}
{{- if and (not .Values.presets.fleet.enabled) (not .Values.presets.flux.enabled) (not .Values.extraSources) -}}
{{- fail "nothing to clone: enable presets.fleet or presets.flux, or name controllers in extraSources" -}}
{{- end -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicaCount > 1 needs leaderElection.enabled: without a leader, the replicas would all write the same Deployments" -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled" -}}
{{- end -}}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.create is false: set serviceAccount.name to the ServiceAccount to use" -}}
{{- end -}}
{{- $_ := include "shardkeeper.shardIDs" . -}}
{{- end -}}
