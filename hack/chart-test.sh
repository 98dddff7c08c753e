#!/usr/bin/env bash
# chart-test.sh: lints and renders the chart CHART with every values set in
# its ci/ folder, checks what each value renders and what the chart must
# refuse, docs/security.md's RBAC table against it, and a `helm upgrade
# --reuse-values` from 0.1.0's values. HELM is the helm command, with its
# environment assignments; CHART_NS, VAP_API and MAP_API come from the
# Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${HELM:?}" "${CHART:?}" "${CHART_NS:?}" "${VAP_API:?}" "${MAP_API:?}"
read -ra helm_cmd <<<"$HELM"
helm() { env "${helm_cmd[@]}" "$@"; }
render() { helm template shardkeeper "$CHART" "$@"; }
fail() { echo "$*"; exit 1; }
# count PATTERN TEXT: the lines of TEXT that match PATTERN.
count() { grep -cE "$1" <<<"$2" || true; }

# Values that the chart must refuse: by its schema, and by its templates.
schema_refuses=(
  'shards=Bad_ID' 'shards=a-very-long-shard-id-of-more-than-forty-chars' 'shards={shard0,Bad_ID}'
  'replicaCount=two' 'logLevel=trace' 'presets.flux.namespace=Flux_System' 'shards[0].id=gpu,shards[0].image=evil' 'unknownKey=1'
  'resources.limits.memory=lots' 'extraSourceMetricsServices[0]=no-service-named' 'extraSourceRequiredArgs[0]=ns/name=not-a-flag'
  'placement.failoverAfter=soon' 'presets.flux.shardKey=Sharding.fluxcd.io/key' 'presets.flux.shardKey=sharding.fluxcd.io/'
  'kubeAPI.initialList=watch'
)
template_refuses=(
  'presets.fleet.enabled=false' 'leaderElection.enabled=false' 'metrics.serviceMonitor.enabled=true'
  'metrics.prometheusRule.enabled=true' 'metrics.dashboard.enabled=true'
  'image.repository=ghcr.io/shardkeeper/shardkeeper' 'shards=a-thirty-character-shard-id-xy'
  'presets.fleet.enabled=false,presets.flux.enabled=true,shards=a-thirty-six-character-flux-shard-id'
)

echo "helm lint --strict $CHART"
helm lint --strict "$CHART"
for f in "$CHART"/ci/*-values.yaml; do
  echo "helm lint --strict + helm template -f $f"
  helm lint --strict --quiet "$CHART" -f "$f" >/dev/null
  render --namespace "$CHART_NS" -f "$f" >/dev/null
done

# The admission policies.
vap='^kind: ValidatingAdmissionPolicy'
n=$(count "$vap" "$(render --api-versions "$VAP_API")")
[ "$n" = 4 ] || fail "with $VAP_API served: $n admission policies and bindings rendered, want 4"
n=$(count "$vap" "$(render --api-versions "$VAP_API" --set admissionPolicy.removalWarning=false)")
[ "$n" = 2 ] || fail "with admissionPolicy.removalWarning=false: $n admission policies and bindings rendered, want 2"
for off in '' "--set admissionPolicy.enabled=false --api-versions $VAP_API"; do
  read -ra args <<<"$off"
  n=$(count "$vap" "$(render "${args[@]}")")
  [ "$n" = 0 ] || fail "helm template $off: $n admission policies rendered, want none"
done
echo "admission policies: rendered only where the cluster serves them and the value allows"

# placement.failoverAfter.
out=$(render --show-only templates/configmap.yaml --set placement.enabled=true --set placement.failoverAfter=5m)
grep -qF 'placement: "failoverAfter: 5m\n"' <<<"$out" || fail "placement.failoverAfter=5m does not seed the ConfigMap's placement key"
out=$(render --show-only templates/configmap.yaml)
if grep -q 'placement:' <<<"$out"; then fail "a placement key rendered without placement.failoverAfter"; fi
echo "placement.failoverAfter: seeds the placement key, and only then"

# The Flux preset.
flux=(--set presets.fleet.enabled=false --set presets.flux.enabled=true)
out=$(render --show-only templates/deployment.yaml)
if grep -q -- '--flux-shard-key' <<<"$out"; then fail "--flux-shard-key rendered without presets.flux"; fi
out=$(render --show-only templates/deployment.yaml "${flux[@]}" --set presets.flux.shardKey=example.com/shard)
grep -qF -- '- --flux-shard-key=example.com/shard' <<<"$out" || fail "presets.flux.shardKey is not passed as --flux-shard-key"
render "${flux[@]}" --set shards=a-thirty-five-char-flux-shard-id-xy >/dev/null ||
  fail "a 35-character shard ID refused with the Flux preset alone"
rbac=$(render --show-only templates/rbac.yaml "${flux[@]}" --set placement.enabled=true)
for want in 'resources: ["buckets","gitrepositories","helmcharts","helmrepositories","ocirepositories"]' \
  'resources: ["kustomizations"]' 'resources: ["imagepolicies","imagerepositories","imageupdateautomations"]' \
  'resources: ["artifactgenerators"]' 'resources: [services]'; do
  grep -qF -- "$want" <<<"$rbac" || fail "with presets.flux: no rule with $want"
done
helmreleases=$(grep -A1 -F 'resources: ["helmreleases"]' <<<"$rbac" || true)
grep -qF 'verbs: [get, list, watch, patch]' <<<"$helmreleases" ||
  fail "with presets.flux and placement: HelmReleases not readable and patchable"
echo "presets.flux: --flux-shard-key, 35-character IDs, its kinds and Services in the RBAC"

# The stamping policy.
place='--set placement.enabled=true'
for off in "$place" "--api-versions $MAP_API" "$place --set placement.stamp.enabled=false --api-versions $MAP_API"; do
  read -ra args <<<"$off"
  out=$(render "${args[@]}")
  if grep -qE '^kind: MutatingAdmissionPolicy|--stamp|-stamp"' <<<"$out"; then
    fail "helm template $off: the stamping policy, --stamp or its RBAC rendered, want none"
  fi
done
out=$(render --set placement.enabled=true --set presets.flux.enabled=true --api-versions "$MAP_API")
n=$(count '^kind: MutatingAdmissionPolicy(Binding)?$' "$out")
[ "$n" = 4 ] || fail "with $MAP_API served and placement: $n stamping policies and bindings, want 4 (Fleet's label and Flux's)"
for want in '- --stamp' 'resourceNames: ["shardkeeper-stamp"]' 'parameterNotFoundAction: Allow' 'failurePolicy: Ignore'; do
  grep -qF -- "$want" <<<"$out" || fail "with the stamping policy: no $want"
done
echo "stamping policy: rendered, with --stamp and its RBAC, only with placement where the cluster serves $MAP_API"

# kubeAPI.initialList.
out=$(render --show-only templates/deployment.yaml)
if grep -q -- '--initial-list' <<<"$out"; then fail "--initial-list rendered with kubeAPI.initialList at its default"; fi
out=$(render --show-only templates/deployment.yaml --set kubeAPI.initialList=stream)
grep -qF -- '- --initial-list=stream' <<<"$out" || fail "kubeAPI.initialList=stream is not passed as --initial-list"
echo "kubeAPI.initialList: passed as --initial-list, and only when not auto"

echo "go test -count=1 -run TestRightsTableIsTheChart ./docs/"
go test -count=1 -run TestRightsTableIsTheChart ./docs/

hack/chart-reuse-values.sh "$CHART" e2e/testdata/chart-v0.1.0-values.yaml '' '--set placement.enabled=true' \
  "--set placement.enabled=true --set presets.flux.enabled=true --api-versions $MAP_API"

# refuses BY ERROR VALUES...: helm template must refuse each --set value
# with an error that contains ERROR, so refused by BY, not by something else.
refuses() {
  local by=$1 error=$2 bad out
  shift 2
  for bad in "$@"; do
    if out=$(render --set "$bad" 2>&1); then
      fail "helm template --set $bad: accepted, but $by must refuse it"
    fi
    grep -q "$error" <<<"$out" || { echo "helm template --set $bad: refused, but not by $by:"; echo "$out"; exit 1; }
    echo "refused by $by: --set $bad"
  done
}
refuses "the schema" "don't meet the specifications of the schema" "${schema_refuses[@]}"
refuses "the chart's checks" "execution error" "${template_refuses[@]}"
