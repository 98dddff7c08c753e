#!/usr/bin/env bash
# demo.sh up|down DIR: run shardkeeper on a local control plane (make demo),
# or stop everything that started (make demo-down).
set -euo pipefail

cmd=${1:?usage: demo.sh up|down DIR}
dir=${2:?usage: demo.sh up|down DIR}
bin=${SHARDKEEPER_BIN_DIR:?SHARDKEEPER_BIN_DIR is not set; run through make}
kubeconfig=$dir/kubeconfig

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid() {
  local f=$1
  if alive "$f"; then
    kill -TERM "$(cat "$f")" 2>/dev/null || true
    for _ in $(seq 1 50); do alive "$f" || break; sleep 0.2; done
    if alive "$f"; then kill -KILL "$(cat "$f")" 2>/dev/null || true; fi
  fi
  rm -f "$f"
}

case $cmd in
down)
  stop_pid "$dir/shardkeeper.pid"
  stop_pid "$dir/cluster/localcluster.pid"
  rm -rf "$dir"
  echo "demo stopped"
  ;;
up)
  if alive "$dir/cluster/localcluster.pid"; then
    echo "the demo is already running; 'make demo-down' stops it"
  else
    rm -rf "$dir"
    mkdir -p "$dir"
    # e2e is a module of its own: built from there, it needs no go.work.
    # Static and with -trimpath, as the daemon and the control plane are
    # built, so that their packages come from the build cache.
    CGO_ENABLED=0 go -C e2e build -trimpath -o "$bin/" ./cmd/localcluster ./cmd/demoseed
    echo "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok..."
    setsid nohup "$bin/localcluster" --bin-dir "$bin" --work-dir "$dir/cluster" --kubeconfig-out "$kubeconfig" \
      >"$dir/localcluster.out" 2>"$dir/localcluster.log" </dev/null &
    for _ in $(seq 1 600); do
      grep -q '^ready' "$dir/localcluster.out" 2>/dev/null && break
      if ! kill -0 $! 2>/dev/null; then echo "the control plane failed to start:"; tail -20 "$dir/localcluster.log"; exit 1; fi
      sleep 0.2
    done
    grep -q '^ready' "$dir/localcluster.out" || { echo "the control plane did not start in time; see $dir/localcluster.log"; exit 1; }
    "$bin/demoseed" --kubeconfig "$kubeconfig" \
      --impersonate cattle-fleet-system/shardkeeper --impersonating-kubeconfig "$dir/shardkeeper.kubeconfig"
    echo "installing the chart..."
    HELM_CACHE_HOME=$dir/helm/cache HELM_CONFIG_HOME=$dir/helm/config HELM_DATA_HOME=$dir/helm/data \
      "$bin/helm" --kubeconfig "$kubeconfig" install shardkeeper charts/shardkeeper --namespace cattle-fleet-system \
      --set presets.flux.enabled=true --set shards='shard0 shard1' --set replicaCount=1 >"$dir/helm.log"
    # kwok's pods run no containers, so the daemon runs here, as the chart's
    # ServiceAccount: every request it makes is checked against the chart's RBAC.
    setsid nohup "$bin/shardkeeper" --kubeconfig "$dir/shardkeeper.kubeconfig" --namespace cattle-fleet-system \
      --preset fleet,flux --leader-elect --metrics-bind-address 127.0.0.1:18080 --health-probe-bind-address 127.0.0.1:18081 \
      >"$dir/shardkeeper.log" 2>&1 </dev/null &
    echo $! >"$dir/shardkeeper.pid"
    for _ in $(seq 1 150); do
      "$bin/kubectl" --kubeconfig "$kubeconfig" -n cattle-fleet-system get deployment gitjob-shard-shard1 >/dev/null 2>&1 && break
      sleep 0.2
    done
  fi
  k="$bin/kubectl --kubeconfig $kubeconfig"
  # The chart's admission policies answer at the prompt. Both edits below
  # are server-side dry runs: the policies run, nothing is stored.
  for _ in $(seq 1 150); do
    $k -n cattle-fleet-system get configmap shardkeeper-status -o jsonpath='{.data.mapped}' 2>/dev/null | grep -q '^shard1:' && break
    sleep 0.2
  done
  # The API server loads new policies within seconds.
  for _ in $(seq 1 150); do
    refused=$($k -n cattle-fleet-system patch configmap shardkeeper --dry-run=server --type merge -p '{"data":{"shards":"Shard_0"}}' 2>&1 | sed 's/^/  #   /' || true)
    grep -q 'denied request' <<<"$refused" && break
    sleep 0.2
  done
  warned=$($k -n cattle-fleet-system patch configmap shardkeeper --dry-run=server --type merge -p '{"data":{"shards":"shard0"}}' 2>&1 | sed 's/^/  #   /' || true)
  cat <<MSG

shardkeeper is running on a local control plane, installed with the chart in
charts/shardkeeper. The daemon runs as a local process acting as the chart's
ServiceAccount (log: $dir/shardkeeper.log; metrics: http://127.0.0.1:18080/metrics).
Fleet's and Flux's controllers are stand-ins: kwok runs their pods, nothing else.

  alias k='$k'
  alias shardkeeper='$bin/shardkeeper'

  # the shards at a glance
  shardkeeper status --kubeconfig $kubeconfig -n cattle-fleet-system

  # the shards and their controller Deployments
  k -n cattle-fleet-system get configmap shardkeeper -o jsonpath='{.data.shards}'; echo
  k get deployments -A -l app.kubernetes.io/managed-by=shardkeeper

  # add a shard, then watch its Deployments appear
  k -n cattle-fleet-system patch configmap shardkeeper --type merge -p '{"data":{"shards":"shard0,shard1,shard2"}}'
  k get deployments -A -l shardkeeper.io/shard=shard2

  # remove shard1: GitRepos and HelmReleases still point at it, so it is kept,
  # and kubectl says so at once; as a dry run of removing it just now said:
$warned
  k -n cattle-fleet-system patch configmap shardkeeper --type merge -p '{"data":{"shards":"shard0,shard2"}}'
  k -n cattle-fleet-system describe configmap shardkeeper        # Events: ShardDeletionBlocked
  k -n cattle-fleet-system get configmap shardkeeper-status -o jsonpath='{.data.status}'

  # move the objects (or force with the annotation) and it goes by itself
  k -n fleet-default label gitrepos payments fleet.cattle.io/shard-ref=shard0 --overwrite
  k -n fleet-default label helmreleases ingress-nginx sharding.fluxcd.io/key=shard0 --overwrite
  k -n cattle-fleet-system annotate configmap shardkeeper shardkeeper.io/force-delete=shard1   # or force it

  # a mistake is refused at the prompt with the daemon's reason, and nothing
  # is stored; as a dry run of it just now said:
$refused
  k -n cattle-fleet-system patch configmap shardkeeper --type merge -p '{"data":{"shards":"Shard_0"}}'

  # what the policy leaves to the daemon (the YAML form) is rejected there,
  # and changes nothing either
  k -n cattle-fleet-system patch configmap shardkeeper --type merge -p '{"data":{"shards":"- id: shard0\\n  image: evil"}}'
  k -n cattle-fleet-system get events --field-selector reason=InvalidShardConfig

Stop everything with: make demo-down
MSG
  ;;
*)
  echo "usage: demo.sh up|down DIR" >&2
  exit 2
  ;;
esac
