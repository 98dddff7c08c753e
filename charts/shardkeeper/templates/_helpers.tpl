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
The registry of the daemon's image, as Fleet's chart picks it: Rancher's
global.cattle.systemDefaultRegistry when set, else image.registry (may be
empty).
*/}}
{{- define "shardkeeper.imageRegistry" -}}
{{- $sdr := dig "cattle" "systemDefaultRegistry" "" (.Values.global | default dict) -}}
{{- default .Values.image.registry $sdr | trimSuffix "/" -}}
{{- end -}}

{{/*
The daemon's image: <registry>/<repository>:<tag>, or <repository>:<tag>
when there is no registry.
*/}}
{{- define "shardkeeper.image" -}}
{{- $registry := include "shardkeeper.imageRegistry" . -}}
{{- $ref := printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- if $registry -}}
{{- printf "%s/%s" $registry $ref -}}
{{- else -}}
{{- $ref -}}
{{- end -}}
{{- end -}}

{{/*
The image pull secrets as a JSON list of {name: ...}: imagePullSecrets, then
Rancher's global.cattle.imagePullSecrets, each given as names or as
{name: ...} objects, without duplicates.
*/}}
{{- define "shardkeeper.imagePullSecrets" -}}
{{- $names := list -}}
{{- $global := dig "cattle" "imagePullSecrets" list (.Values.global | default dict) -}}
{{- range concat (.Values.imagePullSecrets | default list) ($global | default list) -}}
{{- if kindIs "map" . -}}
{{- $names = append $names (toString .name) -}}
{{- else -}}
{{- $names = append $names (toString .) -}}
{{- end -}}
{{- end -}}
{{- $out := list -}}
{{- range $names | compact | uniq -}}
{{- $out = append $out (dict "name" .) -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}

{{/*
The daemon pods' tolerations as a JSON list: the toleration of the taint
that Rancher puts on Linux nodes in clusters with Windows nodes (as Rancher's
own charts do), then .Values.tolerations, without repeating it.
*/}}
{{- define "shardkeeper.tolerations" -}}
{{- $tols := list (dict "key" "cattle.io/os" "operator" "Equal" "value" "linux" "effect" "NoSchedule") -}}
{{- range .Values.tolerations -}}
{{- if not (has . $tols) -}}
{{- $tols = append $tols . -}}
{{- end -}}
{{- end -}}
{{- $tols | toJson -}}
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
The namespaces where the daemon manages the shards' copies of Services, as
a JSON list without duplicates: Fleet's (monitoring-<source>-shard-<id>,
copies of its controllers' metrics Services), Flux's (source-controller-<id>
and source-watcher-<id>, which serve a shard's artifacts) and those of
extraSourceMetricsServices.
*/}}
{{- define "shardkeeper.serviceNamespaces" -}}
{{- $ns := list -}}
{{- if .Values.presets.fleet.enabled }}{{ $ns = append $ns .Values.presets.fleet.namespace }}{{ end -}}
{{- if .Values.presets.flux.enabled }}{{ $ns = append $ns .Values.presets.flux.namespace }}{{ end -}}
{{- range .Values.extraSourceMetricsServices -}}
{{- $ns = append $ns (regexReplaceAll "^([^/]+)/.*$" . "${1}") -}}
{{- end -}}
{{- $ns | uniq | toJson -}}
{{- end -}}

{{/*
The mapped kinds, as JSON {"<group>/<resource>": {"label": ..., "role": ...}}:
the presets' (Fleet: GitRepos, HelmOps, Bundles and BundleDeployments;
Flux: its sources, Kustomizations, HelmReleases, image objects and
ArtifactGenerators, as the daemon's fluxKinds lists them), or mappedKinds
when set, which replace them. role is "derived" for a kind made from
another and only counted (Fleet's Bundles and BundleDeployments), "read"
for a kind whose move reads the whole object first (GitRepos, HelmOps,
HelmReleases), "placed" for the others. A kind of mappedKinds that a preset
knows, by the preset's label, keeps the preset's role, as the daemon keeps
its meaning (pkg/source withPresetMeaning); by another label it is a kind of
its own, "placed".
*/}}
{{- define "shardkeeper.kinds" -}}
{{- $fleet := "fleet.cattle.io/shard-ref" -}}
{{- $flux := include "shardkeeper.fluxShardKey" . -}}
{{- $fleetKinds := dict "fleet.cattle.io/gitrepos" "read" "fleet.cattle.io/helmops" "read" "fleet.cattle.io/bundles" "derived" "fleet.cattle.io/bundledeployments" "derived" -}}
{{- $fluxKinds := dict "kustomize.toolkit.fluxcd.io/kustomizations" "placed" "helm.toolkit.fluxcd.io/helmreleases" "read" "source.extensions.fluxcd.io/artifactgenerators" "placed" -}}
{{- range list "gitrepositories" "ocirepositories" "helmrepositories" "helmcharts" "buckets" -}}
{{- $_ := set $fluxKinds (printf "source.toolkit.fluxcd.io/%s" .) "placed" -}}
{{- end -}}
{{- range list "imagerepositories" "imagepolicies" "imageupdateautomations" -}}
{{- $_ := set $fluxKinds (printf "image.toolkit.fluxcd.io/%s" .) "placed" -}}
{{- end -}}
{{- $kinds := dict -}}
{{- if .Values.mappedKinds -}}
{{- range .Values.mappedKinds -}}
{{- $label := regexReplaceAll "^[^=]*=" . "" -}}
{{- $parts := regexSplit "\\." (regexReplaceAll "=.*$" . "") 3 -}}
{{- $key := printf "%s/%s" (index $parts 2) (index $parts 0) -}}
{{- $role := "placed" -}}
{{- if and (eq $label $fleet) (hasKey $fleetKinds $key) }}{{ $role = get $fleetKinds $key }}{{ end -}}
{{- if and (eq $label $flux) (hasKey $fluxKinds $key) }}{{ $role = get $fluxKinds $key }}{{ end -}}
{{- $_ := set $kinds $key (dict "label" $label "role" $role) -}}
{{- end -}}
{{- else -}}
{{- if .Values.presets.fleet.enabled -}}
{{- range $key, $role := $fleetKinds }}{{ $_ := set $kinds $key (dict "label" $fleet "role" $role) }}{{ end -}}
{{- end -}}
{{- if .Values.presets.flux.enabled -}}
{{- range $key, $role := $fluxKinds }}{{ $_ := set $kinds $key (dict "label" $flux "role" $role) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $kinds | toJson -}}
{{- end -}}

{{/*
The cluster-wide rules on the objects the daemon counts per shard, as a JSON
list of {apiGroups, resources, verbs}: one rule per API group and set of
verbs, resources sorted. Every kind of shardkeeper.kinds is listed and
watched. With placement.enabled:
- the kinds placed are patched (their shard label), but not the derived
  ones (Fleet's Bundles and BundleDeployments), which are made by Fleet and
  only counted;
- the kinds whose move reads the whole object first are also read one by
  one (get), as the caches hold metadata only: GitRepos (placement reads
  spec.forceSyncGeneration before it bumps it), HelmOps (it writes the
  shard label into spec.labels too) and HelmReleases (it reads spec.chart
  before it writes the shard label into spec.chart.metadata.labels, which a
  HelmRelease with spec.chartRef lacks).
*/}}
{{- define "shardkeeper.mappedRules" -}}
{{- $place := .Values.placement.enabled -}}
{{- /* "group/resource" -> list of verbs */ -}}
{{- $kinds := dict -}}
{{- $verbs := dict "derived" (list "list" "watch") "placed" (ternary (list "list" "watch" "patch") (list "list" "watch") $place) "read" (ternary (list "get" "list" "watch" "patch") (list "list" "watch") $place) -}}
{{- range $key, $kind := include "shardkeeper.kinds" . | fromJson -}}
{{- $_ := set $kinds $key (get $verbs $kind.role) -}}
{{- end -}}
{{- /* "group|verbs" -> rule; dict keys range in sorted order */ -}}
{{- $rules := dict -}}
{{- range $key, $verbs := $kinds -}}
{{- $group := regexReplaceAll "/[^/]*$" $key "" -}}
{{- $resource := regexReplaceAll "^.*/" $key "" -}}
{{- $ruleKey := printf "%s|%s" $group (join "," $verbs) -}}
{{- $rule := get $rules $ruleKey | default (dict "apiGroups" (list $group) "resources" list "verbs" $verbs) -}}
{{- $_ := set $rule "resources" (append $rule.resources $resource | uniq | sortAlpha) -}}
{{- $_ := set $rules $ruleKey $rule -}}
{{- end -}}
{{- $out := list -}}
{{- range $_, $rule := $rules -}}
{{- $out = append $out $rule -}}
{{- end -}}
{{- $out | toJson -}}
{{- end -}}

{{/*
The longest shard ID that the enabled sources allow, as source.Set.IDLimit
computes it, in JSON: {"max": N, "name": "<derived name>", "nameMax": 63}.
A Deployment's name (at most 242 characters with its ReplicaSets' suffix)
leaves more than 40 characters for any ID; what can allow fewer is a label
value or Service name of 63 characters that holds the ID after a prefix:
- the pod and selector label app=<controller>-<id> of Flux's copies: 35 for
  app=image-automation-controller-<id>, the longest;
- the copies of Services: Fleet's monitoring-<source>-shard-<id> (29 for
  monitoring-fleet-controller-shard-<id>, the tightest of all), Flux's
  source-controller-<id> and source-watcher-<id> (no tighter than their
  pod labels), and the <service>-shard-<id> of extraSourceMetricsServices
  (<service>-<id> on a Flux source).
The sources come in the daemon's order (the presets, then extraSources),
a source's pod label before its Service, each Service as
extraSourceMetricsServices sets it, so that a tie names what the daemon
names.
*/}}
{{- define "shardkeeper.idLimit" -}}
{{- $keys := list -}}
{{- /* "namespace/name" -> Service; -> separator of the copies' names; -> app label */ -}}
{{- $services := dict -}}
{{- $seps := dict -}}
{{- $apps := dict -}}
{{- if .Values.presets.fleet.enabled -}}
{{- range list "fleet-controller" "gitjob" "helmops" -}}
{{- $key := printf "%s/%s" $.Values.presets.fleet.namespace . -}}
{{- $keys = append $keys $key -}}
{{- $_ := set $services $key (printf "monitoring-%s" .) -}}
{{- end -}}
{{- end -}}
{{- if .Values.presets.flux.enabled -}}
{{- range list "source-controller" "kustomize-controller" "helm-controller" "image-reflector-controller" "image-automation-controller" "source-watcher" -}}
{{- $key := printf "%s/%s" $.Values.presets.flux.namespace . -}}
{{- $keys = append $keys $key -}}
{{- $_ := set $seps $key "-" -}}
{{- $_ := set $apps $key . -}}
{{- if has . (list "source-controller" "source-watcher") -}}
{{- $_ := set $services $key . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range .Values.extraSources -}}
{{- $keys = append $keys (regexReplaceAll "^([^:=]+).*$" . "${1}") -}}
{{- end -}}
{{- range .Values.extraSourceMetricsServices -}}
{{- $_ := set $services (regexReplaceAll "=.*$" . "") (regexReplaceAll "^[^=]*=" . "") -}}
{{- end -}}
{{- $limit := dict "max" 40 "name" "" "nameMax" 63 -}}
{{- range $keys -}}
{{- $sep := get $seps . | default "-shard-" -}}
{{- with get $apps . -}}
{{- $max := sub 63 (len (printf "%s%s" . $sep)) | int -}}
{{- if lt $max (int $limit.max) -}}
{{- $limit = dict "max" $max "name" (printf "pod label app=%s%s<id>" . $sep) "nameMax" 63 -}}
{{- end -}}
{{- end -}}
{{- with get $services . -}}
{{- $max := sub 63 (len (printf "%s%s" . $sep)) | int -}}
{{- if lt $max (int $limit.max) -}}
{{- $limit = dict "max" $max "name" (printf "Service %s%s<id>" . $sep) "nameMax" 63 -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $limit | toJson -}}
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
{{- /* fromYamlArray reads a null document ("---") as no items, which the
daemon refuses: only "[]" or an empty value say no shards. */ -}}
{{- if and (not $items) (not (contains "[" $s)) -}}
{{- fail "shards: the YAML value is null, not a list; for no shards, leave the value empty or write \"[]\"" -}}
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
{{- $limit := include "shardkeeper.idLimit" . | fromJson -}}
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
{{- if gt (len $id) (int $limit.max) -}}
{{- fail (printf "shards[%d]: shard ID %q is %d characters long, at most %d are allowed with the enabled sources (%s must fit in %d characters)" $i $id (len $id) (int $limit.max) $limit.name (int $limit.nameMax)) -}}
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
{{- if and .Values.metrics.prometheusRule.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.prometheusRule.enabled needs metrics.enabled: its alerts read shardkeeper's metrics" -}}
{{- end -}}
{{- if and .Values.metrics.dashboard.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.dashboard.enabled needs metrics.enabled: the dashboard shows shardkeeper's metrics" -}}
{{- end -}}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.create is false: set serviceAccount.name to the ServiceAccount to use" -}}
{{- end -}}
{{- $registry := include "shardkeeper.imageRegistry" . -}}
{{- $first := regexReplaceAll "/.*$" .Values.image.repository "" -}}
{{- if and $registry (contains "/" .Values.image.repository) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $rest := regexReplaceAll "^[^/]*/" .Values.image.repository "" -}}
{{- if dig "cattle" "systemDefaultRegistry" "" (.Values.global | default dict) -}}
{{- fail (printf "image.repository %q starts with a registry, and Rancher's system default registry %q is put in front of it: give only the repository (e.g. image.repository=%s) and mirror the image there" .Values.image.repository $registry $rest) -}}
{{- else -}}
{{- fail (printf "image.repository %q starts with a registry, and image.registry %q is put in front of it: image.repository holds only the repository now, so set image.registry=%s image.repository=%s, or image.registry=\"\" to use the repository as it is" .Values.image.repository $registry $first $rest) -}}
{{- end -}}
{{- end -}}
{{- $key := include "shardkeeper.fluxShardKey" . -}}
{{- if and (contains "/" $key) (gt (len (regexReplaceAll "/[^/]*$" $key "")) 253) -}}
{{- fail (printf "presets.flux.shardKey %q: the prefix before '/' must be at most 253 characters" $key) -}}
{{- end -}}
{{- $_ := include "shardkeeper.shardIDs" . -}}
{{- end -}}

{{/*
The resource rule of the admission policies: the shard ConfigMap and nothing
else. The namespace is matched by the label the API server sets on every
namespace, before any CEL runs.
*/}}
{{- define "shardkeeper.admissionMatch" -}}
namespaceSelector:
  matchLabels:
    kubernetes.io/metadata.name: {{ .Release.Namespace }}
resourceRules:
- apiGroups: [""]
  apiVersions: ["v1"]
  operations: ["CREATE", "UPDATE"]
  resources: ["configmaps"]
  resourceNames: [{{ .Values.configMap.name | quote }}]
{{- end }}

{{/*
A CEL expression for the sentence shardconfig.ValidateID returns for the
shard ID at .id (quoted, and cut to 64 bytes as the daemon does), or, with
.dup, the one for an ID listed twice, whose first index .dup is.
*/}}
{{- define "shardkeeper.celIDError" -}}
(size({{ .id }}) > 40 ? 'shard ID ' + strings.quote(size({{ .id }}) > 64 ? {{ .id }}.substring(0, 64) + '...' : {{ .id }}) + ' is ' + string(size({{ .id }})) + ' characters long, at most 40 are allowed' :
 !{{ .id }}.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') ? 'shard ID ' + strings.quote({{ .id }}) + ' is invalid: use lower-case letters, digits and \'-\', starting and ending with a letter or digit' :
 {{- if .dup }} 'shard ' + strings.quote({{ .id }}) + ' is listed twice (also shards[' + string({{ .dup }}) + '])'{{ else }} ''{{ end }})
{{- end }}

{{/*
Appended to a CEL string expression, splits it into words at the characters
that can stand around a shard ID in any form of the list (plain, YAML block
or flow, quoted): a shard ID is in the list's words when the list names it.
*/}}
{{- define "shardkeeper.celWords" -}}
{{- range list "\\n" "\\t" "\\r" "," "[" "]" "{" "}" ":" "\"" "\\'" }}.replace('{{ . }}', ' '){{ end }}.split(' ').filter(w, w != '')
{{- end }}

{{/*
The keys below were added after 0.1.0. `helm upgrade --reuse-values` from
0.1.0 renders with 0.1.0's values.yaml, not this chart's, so they may be
missing: each is read through a default equal to values.yaml's (the
others, kubeAPI.compression and kubeAPI.initialList, read as false and
"auto" when missing). make chart-test renders the chart with 0.1.0's values
(hack/chart-reuse-values.sh).
*/}}

{{/*
presets.flux.shardKey, or Flux's own key where the values lack it.
*/}}
{{- define "shardkeeper.fluxShardKey" -}}
{{- .Values.presets.flux.shardKey | default "sharding.fluxcd.io/key" -}}
{{- end -}}

{{/*
"true" when the chart installs the stamping policy (stamppolicy.yaml) and
passes --stamp: placement is allowed, placement.stamp.enabled (true where
the values lack it), and the API
server serves MutatingAdmissionPolicy v1 (Kubernetes 1.36 and later).
Otherwise "", and placement labels new objects from its rounds as before.
*/}}
{{- define "shardkeeper.stamp" -}}
{{- if and .Values.placement.enabled (dig "stamp" "enabled" true .Values.placement) (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy") -}}
true
{{- end -}}
{{- end -}}

{{/*
The kinds the stamping policy labels, as JSON {"<label key>": ["<group>/<resource>", ...]}:
the kinds of shardkeeper.kinds but the derived ones: Bundles and
BundleDeployments, listed in mappedKinds or not, are counted and never
placed, so they are not stamped either. Those Fleet makes take the label of
their GitRepo or HelmOp; one created by hand stays unlabelled, with Fleet's
unsharded controllers.
*/}}
{{- define "shardkeeper.stampKinds" -}}
{{- $byLabel := dict -}}
{{- range $key, $kind := include "shardkeeper.kinds" . | fromJson -}}
{{- if ne $kind.role "derived" -}}
{{- $_ := set $byLabel $kind.label (append (get $byLabel $kind.label | default list) $key) -}}
{{- end -}}
{{- end -}}
{{- $byLabel | toJson -}}
{{- end -}}
