//go:build rancher

package rancher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// What the story checks in the cluster besides what the pages show: that
// what a page says happened did happen.

// clusterTimeout bounds a wait for the cluster to reach a state.
const clusterTimeout = 2 * time.Minute

// waitFor polls cond until it holds, and otherwise returns its last error.
func waitFor(ctx context.Context, what string, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(time.Second):
		}
	}
}

// shardStates reads the shards' states from the daemon's status ConfigMap.
func (e *env) shardStates(ctx context.Context) (map[string]status.ShardStatus, error) {
	cm, err := e.kube.CoreV1().ConfigMaps(chartNS).Get(ctx, "shardkeeper-status", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]status.ShardStatus{}
	for _, s := range status.Decode(cm.Data).Shards {
		out[s.ID] = s
	}
	return out, nil
}

// waitShards waits until the status lists exactly the shards of want, each
// in its state.
func (e *env) waitShards(ctx context.Context, want map[string]string) error {
	return waitFor(ctx, "shards in the status", func(ctx context.Context) error {
		got, err := e.shardStates(ctx)
		if err != nil {
			return err
		}
		states := map[string]string{}
		for id, s := range got {
			states[id] = s.State
		}
		if !maps.Equal(states, want) {
			return fmt.Errorf("the status says %v, want %v", states, want)
		}
		return nil
	})
}

// appState is the state Rancher gives an installed App.
func (e *env) appState(ctx context.Context, ns, name string) (string, error) {
	app, err := e.dyn.Resource(appGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	state, _, _ := unstructured.NestedString(app.Object, "status", "summary", "state")
	return state, nil
}

// pluginCached is nil once Rancher reports the UIPlugin named name cached
// and ready.
func (e *env) pluginCached(ctx context.Context, name string) error {
	plugins, err := e.dyn.Resource(uiPluginGVR).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range plugins.Items {
		if n, _, _ := unstructured.NestedString(p.Object, "spec", "plugin", "name"); n != name {
			continue
		}
		state, _, _ := unstructured.NestedString(p.Object, "status", "cacheState")
		ready, _, _ := unstructured.NestedBool(p.Object, "status", "ready")
		if state != "cached" || !ready {
			msg, _, _ := unstructured.NestedString(p.Object, "status", "error")
			return fmt.Errorf("cacheState %q, ready %v %s", state, ready, msg)
		}
		return nil
	}
	return fmt.Errorf("no UIPlugin %s", name)
}

// versionNudge is the annotation the test touches on Rancher's local
// cluster to have Rancher handle the cluster again (waitLocalClusterVersion).
const versionNudge = "e2e.shardkeeper.io/nudged-at"

// Until Rancher records the local cluster's version, the wait touches the
// cluster once per nudgeEvery (longer than the handler's quiet period of
// 10 s), and after versionStandInAfter records the version itself.
const (
	nudgeEvery          = 15 * time.Second
	versionStandInAfter = 45 * time.Second
)

// waitLocalClusterVersion waits until the local cluster's Kubernetes
// version is recorded in Rancher (status.version), which Rancher's
// Extensions page needs to offer an extension whose chart names the
// Kubernetes versions it supports. Rancher records it only as it handles a
// change to the cluster or to one of its nodes, and only if its call to
// the cluster answers within 15 s then (StatsAggregator.updateVersion in
// pkg/controllers/management/clusterstats/statsaggregator.go, v2.15.0). A
// real cluster's nodes change often enough to bring another try; kwok's
// change little once started. So the wait first touches an annotation on
// the cluster to have Rancher handle it again; if Rancher still has not
// recorded it, the wait records what Rancher would: the API server's
// version, without the build date and platform Rancher leaves out.
func (e *env) waitLocalClusterVersion(ctx context.Context) error {
	start := time.Now()
	var nudged time.Time
	return waitFor(ctx, "the local cluster's Kubernetes version in Rancher", func(ctx context.Context) error {
		c, err := e.dyn.Resource(mgmtClusterGVR).Get(ctx, "local", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v, _, _ := unstructured.NestedString(c.Object, "status", "version", "gitVersion"); v != "" {
			return nil
		}
		switch {
		case time.Since(start) >= versionStandInAfter:
			if err := e.recordLocalClusterVersion(ctx); err != nil {
				return fmt.Errorf("no status.version yet, and recording it: %w", err)
			}
			e.t.Logf("Rancher has not recorded the local cluster's version in %s: recorded the API server's", versionStandInAfter)
		case time.Since(nudged) >= nudgeEvery:
			nudged = time.Now()
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, versionNudge, nudged.UTC().Format(time.RFC3339Nano))
			if _, err := e.dyn.Resource(mgmtClusterGVR).Patch(ctx, "local", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("no status.version yet, and touching the cluster: %w", err)
			}
			e.t.Logf("Rancher has not recorded the local cluster's version: touched the cluster to have it handled again")
		}
		return errors.New("the local cluster has no status.version yet")
	})
}

// recordLocalClusterVersion writes the API server's version into the local
// cluster's status.version as Rancher's StatsAggregator.updateVersion does.
func (e *env) recordLocalClusterVersion(ctx context.Context) error {
	v, err := e.kube.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	v.BuildDate, v.Platform = "", ""
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"version": v}})
	if err != nil {
		return err
	}
	_, err = e.dyn.Resource(mgmtClusterGVR).Patch(ctx, "local", types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// shardDeployments maps the names of the Deployments shardkeeper manages
// to their UIDs: a Deployment deleted and created again has a new UID.
func (e *env) shardDeployments(ctx context.Context) (map[string]string, error) {
	list, err := e.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=shardkeeper"})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, d := range list.Items {
		out[d.Namespace+"/"+d.Name] = string(d.UID)
	}
	return out, nil
}

// shardDeploymentNames lists the Deployments of one shard.
func (e *env) shardDeploymentNames(ctx context.Context, shard string) ([]string, error) {
	list, err := e.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: "shardkeeper.io/shard=" + shard})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range list.Items {
		names = append(names, d.Namespace+"/"+d.Name)
	}
	slices.Sort(names)
	return names, nil
}

// appRevision is the Helm revision of an installed App.
func (e *env) appRevision(ctx context.Context, ns, name string) (int64, error) {
	app, err := e.dyn.Resource(appGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	rev, _, err := unstructured.NestedInt64(app.Object, "spec", "version")
	return rev, err
}
