package shardset

import (
	"errors"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/shardkeeper/shardkeeper/pkg/plan"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// The fakes below record every call the controller makes and keep the
// objects written, so that a test can both check the requests and let a
// later reconcile see their outcome.

const testNS = "cattle-fleet-system"

// shardCM is the shard ConfigMap of the tests.
var shardCM = types.NamespacedName{Namespace: testNS, Name: "shardkeeper"}

// kubeObject is a Deployment or a Service.
type kubeObject[T any] interface {
	metav1.Object
	DeepCopy() T
}

// clientCall is one recorded request to a fakeClient.
type clientCall[T any] struct {
	Verb string // create, update, delete
	Key  string // namespace/name
	// Object is what a create or update sent.
	Object T
	// Options are what a delete sent.
	Options *metav1.DeleteOptions
}

// fakeClient is both a client (deploymentWriter, serviceWriter) and a
// cache (deploymentLister, serviceLister) over one store of objects. It is
// safe for the parallel writes of apply.
type fakeClient[T kubeObject[T]] struct {
	resource string

	mu      sync.Mutex
	objects map[string]T
	calls   []clientCall[T]
	// errs fails the request "verb namespace/name" with the error.
	errs map[string]error
	rv   int
	// lagging, when set, is what the cache side shows: a cache that has
	// not seen the writes made since lag.
	lagging map[string]T
}

func newFakeClient[T kubeObject[T]](resource string, objs ...T) *fakeClient[T] {
	f := &fakeClient[T]{resource: resource, objects: map[string]T{}, errs: map[string]error{}}
	for _, o := range objs {
		f.objects[o.GetNamespace()+"/"+o.GetName()] = o.DeepCopy()
	}
	return f
}

func (f *fakeClient[T]) gr() schema.GroupResource { return schema.GroupResource{Resource: f.resource} }

func (f *fakeClient[T]) failOn(verb, key string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[verb+" "+key] = err
}

func (f *fakeClient[T]) record(verb, key string, obj T, opts *metav1.DeleteOptions) error {
	var sent T
	if verb != "delete" {
		sent = obj.DeepCopy()
	}
	f.calls = append(f.calls, clientCall[T]{Verb: verb, Key: key, Object: sent, Options: opts})
	return f.errs[verb+" "+key]
}

func (f *fakeClient[T]) store(o T) T {
	f.rv++
	out := o.DeepCopy()
	out.SetResourceVersion(strconv.Itoa(f.rv))
	if out.GetUID() == "" {
		out.SetUID(types.UID(f.resource + "-uid-" + strconv.Itoa(f.rv)))
	}
	f.objects[o.GetNamespace()+"/"+o.GetName()] = out
	return out.DeepCopy()
}

func (f *fakeClient[T]) Create(o T) (T, error) { return f.write("create", o, false) }

func (f *fakeClient[T]) Update(o T) (T, error) { return f.write("update", o, true) }

// write records a create or update and, like the API server, refuses a
// create of an existing object and an update of a missing one.
func (f *fakeClient[T]) write(verb string, o T, exists bool) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := o.GetNamespace() + "/" + o.GetName()
	var zero T
	if err := f.record(verb, key, o, nil); err != nil {
		return zero, err
	}
	if _, ok := f.objects[key]; ok && !exists {
		return zero, apierrors.NewAlreadyExists(f.gr(), o.GetName())
	} else if !ok && exists {
		return zero, apierrors.NewNotFound(f.gr(), o.GetName())
	}
	return f.store(o), nil
}

func (f *fakeClient[T]) Delete(namespace, name string, opts *metav1.DeleteOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := namespace + "/" + name
	var zero T
	if err := f.record("delete", key, zero, opts); err != nil {
		return err
	}
	o, ok := f.objects[key]
	if !ok {
		return apierrors.NewNotFound(f.gr(), name)
	}
	// The API server's preconditions.
	if p := opts.Preconditions; p != nil {
		if (p.UID != nil && *p.UID != o.GetUID()) || (p.ResourceVersion != nil && *p.ResourceVersion != o.GetResourceVersion()) {
			return apierrors.NewConflict(f.gr(), name, errors.New("the precondition does not match"))
		}
	}
	delete(f.objects, key)
	return nil
}

// touch changes the stored object as someone else's write would (a status
// update of kube-controller-manager): a new resourceVersion, the cache side
// left as it was.
func (f *fakeClient[T]) touch(key string, change func(T)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lagging == nil {
		f.lagging = maps.Clone(f.objects)
	}
	o := f.objects[key].DeepCopy()
	change(o)
	f.store(o)
}

// fakeLive is a fakeClient's API server side: what it stores, whatever
// its cache side shows.
type fakeLive[T kubeObject[T]] struct{ f *fakeClient[T] }

func (l fakeLive[T]) Get(namespace, name string, _ metav1.GetOptions) (T, error) {
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	l.f.calls = append(l.f.calls, clientCall[T]{Verb: "get", Key: namespace + "/" + name})
	o, ok := l.f.objects[namespace+"/"+name]
	if !ok {
		var zero T
		return zero, apierrors.NewNotFound(l.f.gr(), name)
	}
	return o.DeepCopy(), nil
}

// lag freezes the cache side at the objects as they are now, until catchUp.
func (f *fakeClient[T]) lag() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lagging = maps.Clone(f.objects)
}

// catchUp lets the cache side show every write again.
func (f *fakeClient[T]) catchUp() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lagging = nil
}

// cached is what the cache side shows.
func (f *fakeClient[T]) cached() map[string]T {
	if f.lagging != nil {
		return f.lagging
	}
	return f.objects
}

func (f *fakeClient[T]) Get(namespace, name string) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.cached()[namespace+"/"+name]
	if !ok {
		var zero T
		return zero, apierrors.NewNotFound(f.gr(), name)
	}
	return o.DeepCopy(), nil
}

func (f *fakeClient[T]) List(namespace string, selector labels.Selector) ([]T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	cached := f.cached()
	for _, key := range slices.Sorted(maps.Keys(cached)) {
		o := cached[key]
		if o.GetNamespace() == namespace && selector.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o.DeepCopy())
		}
	}
	return out, nil
}

// requests returns the recorded calls, sorted by verb and key (apply
// writes in parallel).
func (f *fakeClient[T]) requests() []clientCall[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.calls)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Verb != out[j].Verb {
			return out[i].Verb < out[j].Verb
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// summary returns "verb namespace/name" of every recorded call, sorted.
func (f *fakeClient[T]) summary() []string {
	var out []string
	for _, c := range f.requests() {
		out = append(out, c.Verb+" "+c.Key)
	}
	return out
}

func (f *fakeClient[T]) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

type fakeDeployments = fakeClient[*appsv1.Deployment]
type fakeServices = fakeClient[*corev1.Service]

// enqueued is one recorded Enqueue or EnqueueAfter.
type enqueued struct {
	Key   string
	After time.Duration
}

// patched is one recorded Patch.
type patched struct {
	Key  string
	Type types.PatchType
	Data []byte
}

// fakeConfigMaps is the shard ConfigMap's controller (shardConfigMap).
type fakeConfigMaps struct {
	mu       sync.Mutex
	enqueues []enqueued
	patches  []patched
	patchErr error
}

func (f *fakeConfigMaps) Enqueue(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enqueues = append(f.enqueues, enqueued{Key: namespace + "/" + name})
}

func (f *fakeConfigMaps) EnqueueAfter(namespace, name string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enqueues = append(f.enqueues, enqueued{Key: namespace + "/" + name, After: d})
}

func (f *fakeConfigMaps) Patch(namespace, name string, pt types.PatchType, data []byte, _ ...string) (*corev1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.patches = append(f.patches, patched{Key: namespace + "/" + name, Type: pt, Data: slices.Clone(data)})
	if f.patchErr != nil {
		return nil, f.patchErr
	}
	// Like the API server, a new resourceVersion: above the tests' "42"
	// and "77", the versions of the ConfigMaps they reconcile.
	rv := strconv.Itoa(100 + len(f.patches))
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: rv}}, nil
}

// fakeStatusStore holds the status ConfigMaps (statusStore). Like the API
// server it refuses a create of an existing object and an update whose
// resourceVersion is not the current one.
type fakeStatusStore struct {
	objects map[string]*corev1.ConfigMap
	// calls are "get|create|update namespace/name".
	calls []string
	rv    int
	// onGet, if set, runs during each Get, as if the request were in flight.
	onGet func()
}

func newFakeStatusStore() *fakeStatusStore {
	return &fakeStatusStore{objects: map[string]*corev1.ConfigMap{}}
}

var configMapsGR = schema.GroupResource{Resource: "configmaps"}

func (f *fakeStatusStore) Get(namespace, name string, _ metav1.GetOptions) (*corev1.ConfigMap, error) {
	f.calls = append(f.calls, "get "+namespace+"/"+name)
	if f.onGet != nil {
		f.onGet()
	}
	cm, ok := f.objects[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(configMapsGR, name)
	}
	return cm.DeepCopy(), nil
}

func (f *fakeStatusStore) Create(cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	key := cm.Namespace + "/" + cm.Name
	f.calls = append(f.calls, "create "+key)
	if _, ok := f.objects[key]; ok {
		return nil, apierrors.NewAlreadyExists(configMapsGR, cm.Name)
	}
	return f.store(cm), nil
}

func (f *fakeStatusStore) Update(cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	key := cm.Namespace + "/" + cm.Name
	f.calls = append(f.calls, "update "+key)
	cur, ok := f.objects[key]
	if !ok {
		return nil, apierrors.NewNotFound(configMapsGR, cm.Name)
	}
	if cm.ResourceVersion != cur.ResourceVersion {
		return nil, apierrors.NewConflict(configMapsGR, cm.Name, nil)
	}
	return f.store(cm), nil
}

func (f *fakeStatusStore) store(cm *corev1.ConfigMap) *corev1.ConfigMap {
	f.rv++
	out := cm.DeepCopy()
	out.ResourceVersion = strconv.Itoa(f.rv)
	f.objects[cm.Namespace+"/"+cm.Name] = out
	return out.DeepCopy()
}

// writes returns the recorded creates and updates.
func (f *fakeStatusStore) writes() []string {
	var out []string
	for _, c := range f.calls {
		if c[:3] != "get" {
			out = append(out, c)
		}
	}
	return out
}

// env is a Controller built by newController over fakes.
type env struct {
	c           *Controller
	configMaps  *fakeConfigMaps
	statusMaps  *fakeStatusStore
	deployments *fakeDeployments
	services    *fakeServices
	recorder    *record.FakeRecorder
	mapped      *testfixture.MappedTable
}

// newEnv returns a Controller whose one namespace, testNS, holds deps and
// svcs.
func newEnv(t *testing.T, opts Options, deps []*appsv1.Deployment, svcs []*corev1.Service) *env {
	t.Helper()
	if opts.ConfigMap == (types.NamespacedName{}) {
		opts.ConfigMap = shardCM
	}
	e := &env{
		configMaps:  &fakeConfigMaps{},
		statusMaps:  newFakeStatusStore(),
		deployments: newFakeClient("deployments", deps...),
		services:    newFakeClient("services", svcs...),
		recorder:    record.NewFakeRecorder(1000),
		mapped:      &testfixture.MappedTable{Objects: map[string]map[string][]string{}},
	}
	e.c = e.restart(opts)
	return e
}

// restart returns a fresh Controller over the same fakes, as after a
// restart of the daemon.
func (e *env) restart(opts Options) *Controller {
	if opts.ConfigMap == (types.NamespacedName{}) {
		opts.ConfigMap = shardCM
	}
	return newController(opts, e.configMaps, e.statusMaps,
		map[string]deploymentAccess{testNS: {cache: e.deployments, client: e.deployments, live: fakeLive[*appsv1.Deployment]{e.deployments}}},
		map[string]serviceAccess{testNS: {cache: e.services, client: e.services}},
		e.mapped, e.recorder)
}

// applyAnnounced applies p and emits its Events on cm, as a reconcile does
// once its caches show the writes.
func (e *env) applyAnnounced(cm *corev1.ConfigMap, p plan.Plan) error {
	_, err := e.c.apply(p, nil)
	e.c.announceSeen(cm)
	return err
}

// writeErr is the error of a write, whether its object existed or not.
func writeErr(_ bool, err error) error { return err }

// events drains the Events recorded so far, as "Type Reason Message".
func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// shardConfigMapObject is the shard ConfigMap with the given shards and
// force-delete annotation ("" for none).
func shardConfigMapObject(shards, force string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: shardCM.Namespace, Name: shardCM.Name, UID: "cm-uid", ResourceVersion: "42"},
		Data:       map[string]string{"shards": shards},
	}
	if force != "" {
		cm.Annotations = map[string]string{"shardkeeper.io/force-delete": force}
	}
	return cm
}
