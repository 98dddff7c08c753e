// Package admission holds the chart's rules to the corpus that the
// daemon's parser, its removal guard and its stamp records are tested on
// (pkg/testfixture.CorpusPath): its admission policies, evaluated as the
// API server does, with its own CEL environment and evaluators
// (k8s.io/apiserver at the version of the e2e control plane), and its
// Helm templates' check of the shards value. A rule changed on one side
// and not the other fails here in seconds, not in an e2e run.
//
// It lives in the e2e module, not the daemon's, because the API server's
// admission code brings gRPC, OpenTelemetry and cobra with it, which only
// this test needs. It needs Helm, as docs/ does: make test-unit passes it.
package admission

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/stamp"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

const (
	release   = "shardkeeper"
	namespace = "cattle-fleet-system"
	// The name of the shard ConfigMap with the chart's default values.
	configMapName = "shardkeeper"
)

var (
	root          = filepath.Join("..", "..")
	configMapGVK  = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
)

func readCorpus(t *testing.T) testfixture.Corpus {
	t.Helper()
	return testfixture.ReadCorpus(t, filepath.Join(root, testfixture.CorpusPath))
}

// TestConfigPolicy holds the policy <release>-config to the daemon's
// verdicts: it refuses what the daemon refuses, with the daemon's
// sentence, admits what the daemon accepts, and admits what the corpus
// says it leaves to the daemon.
func TestConfigPolicy(t *testing.T) {
	policy := validatingPolicy(t, release+"-config")
	for _, c := range readCorpus(t).Configs {
		t.Run(c.Name, func(t *testing.T) {
			data, binaryData, annotations := c.ConfigMap()
			denied := validate(t, policy, admission.Create, shardConfigMap(data, binaryData, annotations), nil, nil)
			want := c.Error
			if want == "" {
				want = c.IDLimitError
			}
			if want == "" || c.Policy == "admits" {
				assert.Empty(t, denied, "the policy refuses what the daemon accepts, or what the corpus leaves to the daemon")
				return
			}
			require.NotEmpty(t, denied, "the policy admits what the daemon refuses: %s", want)
			assert.Equal(t, want, denied[0], "the first refusal is the daemon's sentence")
		})
	}
}

// TestRemovalPolicy holds the warning of the policy <release>-removal to
// the removal guard: an edit is warned about when the daemon keeps
// shards for their objects, and the warning names exactly those shards,
// their counts, their state and the command that forces them.
func TestRemovalPolicy(t *testing.T) {
	policy := validatingPolicy(t, release+"-removal")
	for _, c := range readCorpus(t).Removals {
		t.Run(c.Name, func(t *testing.T) {
			oldData, newData, annotations := c.ConfigMaps()
			params := statusConfigMap(t, c.Mapped)
			warned := validate(t, policy, admission.Update, shardConfigMap(newData, nil, annotations), shardConfigMap(oldData, nil, nil), params)
			if len(c.Kept) == 0 {
				assert.Empty(t, warned, "no shard is kept for its objects")
				return
			}
			require.Len(t, warned, 1, "one warning, for the shards kept: %v", c.Kept)
			msg := warned[0]
			assert.True(t, strings.HasSuffix(msg, fmt.Sprintf("kubectl -n %s annotate configmap %s shardkeeper.io/force-delete=%s",
				namespace, configMapName, strings.Join(c.Kept, ","))), "the command that forces the kept shards ends %q", msg)
			// With placement the policy cannot tell a shard that drains
			// from one that a person's label pins: it names both.
			state := c.KeptState()
			assert.True(t, strings.Contains(msg, "kept ("+state+")") || strings.Contains(msg, ", or "+state+" while"),
				"the warning names the kept shards' state, %s: %q", state, msg)
			for _, id := range c.Kept {
				counts := plan.FormatCounts(c.Mapped[id])
				if len(c.Kept) == 1 {
					assert.Contains(t, msg, "shard "+id+" still has "+counts+" mapped")
				} else {
					assert.Contains(t, msg, id+" ("+counts+")")
				}
			}
		})
	}

	t.Run("a create is not an edit", func(t *testing.T) {
		params := statusConfigMap(t, map[string]map[string]int{"b": {"gitrepos": 1}})
		assert.Empty(t, validate(t, policy, admission.Create, shardConfigMap(map[string]string{"shards": "a"}, nil, nil), nil, params))
	})
}

// TestStampPolicy holds the stamping policies to the daemon's records: a
// new object is labelled with the shard that the records the daemon
// publishes after the round (stamp.Params) give it, or with none.
func TestStampPolicy(t *testing.T) {
	policies := mutatingPolicies(t)
	for _, c := range readCorpus(t).Stamps {
		t.Run(c.Name, func(t *testing.T) {
			p, err := c.Setting()
			require.NoError(t, err)
			params := &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: configMapName + "-stamp", Namespace: namespace, ResourceVersion: "7"},
				Data:       stamp.Params(p, c.Round(), nil, c.GroupedKinds),
			}
			obj := newObject(c.New)
			stamped := map[string]string{}
			for _, policy := range policies {
				if !policy.matches(c.New.Group, c.New.Resource) {
					continue
				}
				obj = policy.mutate(t, obj, params)
			}
			for k, v := range obj.GetLabels() {
				if c.New.Labels[k] != v {
					stamped[k] = v
				}
			}
			assigned := obj.GetAnnotations()["shardkeeper.io/assigned-shard"]
			if c.Stamp == "" {
				assert.Empty(t, stamped, "no label is set")
				assert.Empty(t, assigned, "no assignment is recorded")
				return
			}
			require.Len(t, stamped, 1, "one shard label is set")
			for _, shard := range stamped {
				assert.Equal(t, c.Stamp, shard, "the shard stamped")
			}
			assert.Equal(t, c.Stamp, assigned, "the assignment recorded")
			// Derived work moves in the same write, as placement writes it.
			var derived map[string]any
			switch c.New.Resource {
			case "helmops":
				derived, _, _ = unstructured.NestedMap(obj.Object, "spec", "labels")
			case "helmreleases":
				derived, _, _ = unstructured.NestedMap(obj.Object, "spec", "chart", "metadata", "labels")
			default:
				return
			}
			for k := range stamped {
				assert.Equal(t, c.Stamp, derived[k], "the derived objects' label %s", k)
			}
		})
	}

	t.Run("the probe is answered with the records' version", func(t *testing.T) {
		probe := &unstructured.Unstructured{}
		probe.SetGroupVersionKind(configMapGVK)
		probe.SetNamespace(namespace)
		probe.SetName(configMapName + "-stamp-probe")
		probe.SetAnnotations(map[string]string{"shardkeeper.io/stamp-probe": "fleet.cattle.io/shard-ref"})
		params := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}
		for _, policy := range policies {
			if policy.matches("", "configmaps") {
				probe = policy.mutate(t, probe, params)
			}
		}
		assert.Equal(t, "7", probe.GetAnnotations()["shardkeeper.io/stamp-params"])
		assert.Empty(t, probe.GetLabels())
	})
}

// render returns the chart's documents of kind, rendered by `helm
// template` with args.
func render[T any](t *testing.T, kind string, args ...string) []*T {
	t.Helper()
	out := testfixture.HelmTemplate(t, testfixture.Helm(t), release, filepath.Join(root, "charts", "shardkeeper"), namespace, args...)
	var docs []*T
	for doc := range strings.SplitSeq(out, "\n---\n") {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		if meta.Kind != kind {
			continue
		}
		obj := new(T)
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), obj), "decoding a %s", kind)
		docs = append(docs, obj)
	}
	require.NotEmpty(t, docs, "the chart renders no %s with %v", kind, args)
	return docs
}

// validatingPolicy renders the chart with its default values and returns
// the ValidatingAdmissionPolicy name, compiled.
func validatingPolicy(t *testing.T, name string) validating.Validator {
	t.Helper()
	for _, p := range render[admissionregistrationv1.ValidatingAdmissionPolicy](t, "ValidatingAdmissionPolicy",
		"--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy", "--show-only", "templates/admissionpolicy.yaml") {
		if p.Name == name {
			require.Equal(t, admissionregistrationv1.Ignore, *p.Spec.FailurePolicy, "the policy fails open")
			return compileValidating(t, p)
		}
	}
	t.Fatalf("the chart renders no ValidatingAdmissionPolicy %s", name)
	return nil
}

// compiler returns the compiler the API server compiles a policy with,
// given the environment a new policy is checked in when it is created: an
// expression the API server would refuse to store fails here too.
func compiler(t *testing.T) *plugincel.CompositedCompiler {
	t.Helper()
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	require.NoError(t, err)
	return c
}

// compileVariables compiles the policy's variables into c, in order, each
// seeing those before it; one that does not compile fails the test, as
// the API server refuses to store it.
func compileVariables(t *testing.T, c *plugincel.CompositedCompiler, vars []admissionregistrationv1.Variable, opts plugincel.OptionalVariableDeclarations) {
	t.Helper()
	for _, v := range vars {
		res := c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.NewExpressions)
		if res.Error != nil {
			t.Errorf("variable %s does not compile: %v", v.Name, res.Error)
		}
	}
}

// compileValidating compiles p as the API server's ValidatingAdmissionPolicy
// plugin does (its compilePolicy, which it does not export).
func compileValidating(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	t.Helper()
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	messageOpts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil}
	c := compiler(t)
	compileVariables(t, c, p.Spec.Variables, opts)
	var matcher matchconditions.Matcher
	if len(p.Spec.MatchConditions) > 0 {
		conds := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
		for i := range p.Spec.MatchConditions {
			conds[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		matcher = matchconditions.NewMatcher(c.CompileCondition(conds, opts, environment.NewExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	return validating.NewValidator(
		c.CompileCondition(validations, opts, environment.NewExpressions),
		matcher,
		c.CompileCondition(nil, opts, environment.NewExpressions),
		c.CompileCondition(messages, messageOpts, environment.NewExpressions),
		p.Spec.FailurePolicy,
		nil,
	)
}

// validate runs the policy on a request for the shard ConfigMap and
// returns the messages of the validations that fail, in order: the first
// is the refusal the API server returns, each a warning with a Warn
// binding. An expression that fails to compile or to evaluate fails the
// test: the policy fails open, and would let anything through unseen.
func validate(t *testing.T, v validating.Validator, op admission.Operation, obj, old *corev1.ConfigMap, params runtime.Object) []string {
	t.Helper()
	attr := versioned(t, obj, old, op)
	var failed []string
	for _, d := range v.Validate(t.Context(), configMapsGVR, attr, params, releaseNamespace(), celconfig.RuntimeCELCostBudget, allowAll{}).Decisions {
		switch {
		case d.Evaluation == validating.EvalError:
			t.Errorf("an expression failed: %s", d.Message)
		case d.Action == validating.ActionDeny:
			failed = append(failed, d.Message)
		}
	}
	return failed
}

// versioned returns the attributes of a request on the shard ConfigMap.
func versioned(t *testing.T, obj, old *corev1.ConfigMap, op admission.Operation) *admission.VersionedAttributes {
	t.Helper()
	var oldObj runtime.Object
	if old != nil {
		oldObj = old
	}
	attr := admission.NewAttributesRecord(obj, oldObj, configMapGVK, obj.Namespace, obj.Name, configMapsGVR, "", op, nil, false, &user.DefaultInfo{Name: "operator"})
	va, err := admission.NewVersionedAttributes(attr, configMapGVK, nil)
	require.NoError(t, err)
	return va
}

func releaseNamespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{"kubernetes.io/metadata.name": namespace}}}
}

// shardConfigMap returns the shard ConfigMap with data, binaryData and
// annotations.
func shardConfigMap(data map[string]string, binaryData map[string][]byte, annotations map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: configMapName, Namespace: namespace},
	}
	if len(data) > 0 {
		cm.Data = data
	}
	if len(binaryData) > 0 {
		cm.BinaryData = binaryData
	}
	if len(annotations) > 0 {
		cm.Annotations = annotations
	}
	return cm
}

// statusConfigMap returns the status ConfigMap as the daemon writes it
// with the shards that have objects mapped, in its order.
func statusConfigMap(t *testing.T, mapped map[string]map[string]int) *corev1.ConfigMap {
	t.Helper()
	var shards []status.ShardStatus
	for _, id := range slices.Sorted(maps.Keys(mapped)) {
		shards = append(shards, status.ShardStatus{ID: id, State: status.StateActive, Mapped: mapped[id]})
	}
	data, err := status.Encode(status.Status{Shards: shards})
	require.NoError(t, err)
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: configMapName + "-status", Namespace: namespace},
		Data:       data,
	}
}

// allowAll stands for the API server's authorizer, which the policies do
// not consult.
type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

// mutating is a MutatingAdmissionPolicy, compiled.
type mutating struct {
	spec     admissionregistrationv1.MutatingAdmissionPolicySpec
	compiler *plugincel.CompositedCompiler
	matcher  matchconditions.Matcher
	patchers []patch.Patcher
}

// mutatingPolicies renders the chart with placement allowed and both
// presets, and returns its stamping policies compiled as the API server's
// MutatingAdmissionPolicy plugin compiles them (its compilePolicy, which
// it does not export).
func mutatingPolicies(t *testing.T) []mutating {
	t.Helper()
	var out []mutating
	for _, p := range render[admissionregistrationv1.MutatingAdmissionPolicy](t, "MutatingAdmissionPolicy",
		"--set", "placement.enabled=true", "--set", "presets.flux.enabled=true",
		"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy", "--show-only", "templates/stamppolicy.yaml") {
		require.Equal(t, admissionregistrationv1.Ignore, *p.Spec.FailurePolicy, "the policy fails open")
		opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
		c := compiler(t)
		compileVariables(t, c, p.Spec.Variables, opts)
		m := mutating{spec: p.Spec, compiler: c}
		conds := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
		for i := range p.Spec.MatchConditions {
			conds[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		m.matcher = matchconditions.NewMatcher(c.CompileCondition(conds, opts, environment.NewExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
		patchOpts := opts
		patchOpts.HasPatchTypes = true
		for _, mu := range p.Spec.Mutations {
			require.Equal(t, admissionregistrationv1.PatchTypeApplyConfiguration, mu.PatchType)
			accessor := &patch.ApplyConfigurationCondition{Expression: mu.ApplyConfiguration.Expression}
			m.patchers = append(m.patchers, patch.NewApplyConfigurationPatcher(c.CompileMutatingEvaluator(accessor, patchOpts, environment.NewExpressions)))
		}
		out = append(out, m)
	}
	return out
}

// matches reports whether the policy's resource rules take a create of
// group/resource.
func (m mutating) matches(group, resource string) bool {
	for _, r := range m.spec.MatchConstraints.ResourceRules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
			return true
		}
	}
	return false
}

// mutate applies the policy's mutations to a create of obj one after the
// other, as the API server does, and returns the object they leave. An
// expression that cannot be evaluated fails the test: the policy fails
// open, and would leave the object unstamped unseen.
func (m mutating) mutate(t *testing.T, obj *unstructured.Unstructured, params runtime.Object) *unstructured.Unstructured {
	t.Helper()
	gvk := obj.GroupVersionKind()
	gvr := gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s")
	attr := admission.NewAttributesRecord(obj, nil, gvk, obj.GetNamespace(), obj.GetName(), gvr, "", admission.Create, nil, false, &user.DefaultInfo{Name: "operator"})
	va, err := admission.NewVersionedAttributes(attr, gvk, nil)
	require.NoError(t, err)
	vars := plugincel.OptionalVariableBindings{VersionedParams: params, Authorizer: allowAll{}}
	// The variables are evaluated once a request, in a context of its own.
	ctx := m.compiler.CreateContext(t.Context())
	match := m.matcher.Match(ctx, va, params, allowAll{})
	require.NoError(t, match.Error, "a match condition failed")
	if !match.Matches {
		return obj
	}
	for i, p := range m.patchers {
		out, err := p.Patch(ctx, patch.Request{
			MatchedResource:     gvr,
			VersionedAttributes: va,
			OptionalVariables:   vars,
			Namespace:           releaseNamespace(),
			TypeConverter:       managedfields.NewDeducedTypeConverter(),
		}, celconfig.RuntimeCELCostBudget)
		require.NoError(t, err, "mutation %d failed", i)
		va.UpdateObject(out)
	}
	u, ok := va.GetObject().(*unstructured.Unstructured)
	require.True(t, ok, "the mutations return %T", va.GetObject())
	return u
}

// newObject returns the object of a create request.
func newObject(o testfixture.NewObject) *unstructured.Unstructured {
	kinds := map[string]string{"gitrepos": "GitRepo", "helmops": "HelmOp", "helmreleases": "HelmRelease", "kustomizations": "Kustomization"}
	versions := map[string]string{"fleet.cattle.io": "v1alpha1", "helm.toolkit.fluxcd.io": "v2", "kustomize.toolkit.fluxcd.io": "v1"}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: o.Group, Version: versions[o.Group], Kind: kinds[o.Resource]})
	u.SetNamespace(o.Namespace)
	u.SetName(o.Name)
	u.SetGenerateName(o.GenerateName)
	if len(o.Labels) > 0 {
		u.SetLabels(o.Labels)
	}
	if o.Spec != nil {
		u.Object["spec"] = o.Spec
	}
	return u
}
