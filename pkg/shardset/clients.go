package shardset

import (
	"time"

	appscontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/apps/v1"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// The controller reaches the cluster only through the narrow interfaces
// below: exactly the methods it calls. Wrangler's generated controllers,
// clients and caches satisfy them unchanged (see the assertions at the end
// of this file); the tests pass recording fakes.

// configMapQueue requeues the shard ConfigMap's key.
type configMapQueue interface {
	Enqueue(namespace, name string)
	EnqueueAfter(namespace, name string, duration time.Duration)
}

// configMapPatcher patches the shard ConfigMap (its force-delete
// annotation).
type configMapPatcher interface {
	Patch(namespace, name string, pt types.PatchType, data []byte, subresources ...string) (*corev1.ConfigMap, error)
}

// shardConfigMap is the shard ConfigMap's controller as the Controller uses
// it: to requeue the key and to patch the annotation.
type shardConfigMap interface {
	configMapQueue
	configMapPatcher
}

// statusStore reads and writes the status ConfigMap.
type statusStore interface {
	Get(namespace, name string, options metav1.GetOptions) (*corev1.ConfigMap, error)
	Create(*corev1.ConfigMap) (*corev1.ConfigMap, error)
	Update(*corev1.ConfigMap) (*corev1.ConfigMap, error)
}

// objectWriter creates, updates and deletes shard objects of one type:
// Deployments or metrics Services.
type objectWriter[T any] interface {
	Create(T) (T, error)
	Update(T) (T, error)
	Delete(namespace, name string, options *metav1.DeleteOptions) error
}

// objectGetter reads one shard object from the API server, not the cache.
type objectGetter[T any] interface {
	Get(namespace, name string, options metav1.GetOptions) (T, error)
}

// objectLister lists and reads the cached objects of one type in a
// namespace.
type objectLister[T any] interface {
	List(namespace string, selector labels.Selector) ([]T, error)
	Get(namespace, name string) (T, error)
}

// access is how the controller reaches the objects of one type in one
// source namespace: the cache it reads, the client it writes with, and
// the API server's own copy, read before a delete is sent again (nil for
// the Services, which nobody else writes).
type access[T any] struct {
	cache  objectLister[T]
	client objectWriter[T]
	live   objectGetter[T]
}

type (
	deploymentAccess = access[*appsv1.Deployment]
	serviceAccess    = access[*corev1.Service]
)

// The wrangler types that Register passes satisfy the narrow interfaces.
var (
	_ shardConfigMap                   = corecontrollers.ConfigMapController(nil)
	_ statusStore                      = corecontrollers.ConfigMapClient(nil)
	_ objectWriter[*appsv1.Deployment] = appscontrollers.DeploymentClient(nil)
	_ objectGetter[*appsv1.Deployment] = appscontrollers.DeploymentClient(nil)
	_ objectLister[*appsv1.Deployment] = appscontrollers.DeploymentCache(nil)
	_ objectWriter[*corev1.Service]    = corecontrollers.ServiceClient(nil)
	_ objectLister[*corev1.Service]    = corecontrollers.ServiceCache(nil)
)
