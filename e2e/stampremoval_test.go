//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/stamp"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// TestRemovalWaitsUntilNoObjectCanBeBornOnTheShard: on the real API server,
// with the chart's stamping policies, a shard is deleted only once the
// policy of every shard label answers that it applies the records that
// withdrew the shard. With the Fleet label's binding gone (the policy
// cannot answer, and may stamp from anything), the removal waits and says
// why; with it back, the shard goes. An object born on a deleted shard
// anyway, as the policy leaves it when it fails open, is counted, warned
// about and taken back by placement.
func TestRemovalWaitsUntilNoObjectCanBeBornOnTheShard(t *testing.T) {
	s := newScenario(t, "stampgone", true)
	s.chartArgs = []string{"--api-versions", mapAPIVersion}
	policies := s.installStampPolicies()
	scope := fmt.Sprintf("namespaces: [%s]\nmaxMoves: 200\ninterval: 2s\ncooldown: 0s\n", s.fleetNS)
	s.createConfigMap("s1,s2,s3")
	s.start("--allow-placement", "--stamp")
	s.setPlacement("s1,s2,s3", scope)
	s.waitShards("s1", "s2", "s3")
	s.waitStamping(gitRepos, testfixture.Object(gitRepos, s.fleetNS, "probe", "x", ""), fleetLabel)

	// Removed while the policies answer: deleted, as before.
	s.setPlacement("s1,s2", scope)
	s.waitShards("s1", "s2")

	// The records name s2 again once a round after that removal has
	// published them (the withdrawal of s3 took the sequence out whole):
	// only then can a policy that does not answer stamp onto s2.
	eventually(t, time.Minute, "the stamp records naming s2", func() error {
		cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, stamp.Name(s.cmName), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.Contains(strings.Split(cm.Data[stamp.KeySequence], ","), "s2") {
			return notYet("not yet", fmt.Errorf("%v", cm.Data))
		}
		return nil
	})

	// The binding of the Fleet label's policy goes: that policy no longer
	// answers, and the removal of s2 waits.
	var binding *unstructured.Unstructured
	for _, o := range policies {
		if o.GetKind() == "MutatingAdmissionPolicyBinding" && strings.HasSuffix(o.GetName(), "-stamp-fleet-cattle-io-shard-ref") {
			binding = o
		}
	}
	require.NotNil(t, binding, "the Fleet label's binding")
	bindings := dyn.Resource(mutatingPolicyResources["MutatingAdmissionPolicyBinding"])
	require.NoError(t, bindings.Delete(s.ctx, binding.GetName(), metav1.DeleteOptions{}))
	eventually(t, time.Minute, "the API server no longer applying the Fleet label's policy", func() error {
		if s.probe(fleetLabel) != "" {
			return notYet("it still answers", nil)
		}
		return nil
	})
	s.setPlacement("s1", scope)
	eventually(t, time.Minute, "the removal of s2 waiting for the policy", func() error {
		for _, sh := range s.status().Shards {
			if sh.ID == "s2" && sh.State == "Waiting" && strings.Contains(sh.Message, "did not answer") {
				return nil
			}
		}
		return notYet("not waiting", fmt.Errorf("%+v", s.status().Shards))
	})
	holds(t, 5*time.Second, "s2's Deployments stay while new objects may be born on it", func() error {
		if _, ok := s.deployments()["fleet-controller-shard-s2"]; !ok {
			return errors.New("fleet-controller-shard-s2 was deleted")
		}
		return nil
	})
	require.Empty(t, s.probe(fleetLabel), "the probe, as the daemon sends it, gets no answer")
	require.NotEmpty(t, s.probe(fluxLabel), "the other policy answers it")
	binding.SetResourceVersion("")
	_, err := bindings.Create(s.ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	s.waitShards("s1")

	// Born on a deleted shard, as a stale policy would stamp it: counted,
	// warned about, and placement takes it back onto s1. One labelled by
	// hand with an unknown ID is only warned about.
	born := testfixture.Object(gitRepos, s.fleetNS, "born-on-s3", fleetLabel, "s3")
	born.SetAnnotations(map[string]string{placement.AssignedShardAnnotation: "s3"})
	_, err = dyn.Resource(gitRepos).Namespace(s.fleetNS).Create(s.ctx, born, metav1.CreateOptions{})
	require.NoError(t, err)
	s.object(gitRepos, "typo", fleetLabel, "s3")
	s.waitEvent("UnknownShard", `carry shard ID "s3"`)
	eventually(t, time.Minute, "born-on-s3 placed on s1", func() error {
		o, err := dyn.Resource(gitRepos).Namespace(s.fleetNS).Get(s.ctx, "born-on-s3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := o.GetLabels()[fleetLabel]; got != "s1" {
			return notYet("on "+got, nil)
		}
		return nil
	})
	typo, err := dyn.Resource(gitRepos).Namespace(s.fleetNS).Get(context.Background(), "typo", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "s3", typo.GetLabels()[fleetLabel], "a shard ID set by hand is the operator's")
}

// probe creates the stamp probe in a dry run, as the daemon does before a
// removal, and returns the answer of the policy of label ("" for none).
func (s *scenario) probe(label string) string {
	s.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: stamp.ProbeName(s.cmName), Annotations: map[string]string{stamp.AnnotationProbe: label}}}
	out, err := kube.CoreV1().ConfigMaps(s.fleetNS).Create(s.ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(s.t, err)
	return out.Annotations[stamp.AnnotationParams]
}
