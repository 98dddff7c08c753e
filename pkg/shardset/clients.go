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

// deploymentWriter creates, updates and deletes shard Deployments.
type deploymentWriter interface {
	Create(*appsv1.Deployment) (*appsv1.Deployment, error)
	Update(*appsv1.Deployment) (*appsv1.Deployment, error)
	Delete(namespace, name string, options *metav1.DeleteOptions) error
}

// deploymentLister lists the cached Deployments of a namespace.
type deploymentLister interface {
	List(namespace string, selector labels.Selector) ([]*appsv1.Deployment, error)
}

// serviceWriter creates, updates and deletes shard metrics Services.
type serviceWriter interface {
	Create(*corev1.Service) (*corev1.Service, error)
	Update(*corev1.Service) (*corev1.Service, error)
	Delete(namespace, name string, options *metav1.DeleteOptions) error
}

// serviceLister lists the cached Services of a namespace.
type serviceLister interface {
	List(namespace string, selector labels.Selector) ([]*corev1.Service, error)
}

// deploymentAccess is how the controller reaches the Deployments of one
// source namespace: the cache it reads and the client it writes with.
type deploymentAccess struct {
	cache  deploymentLister
	client deploymentWriter
}

// serviceAccess is the same for the Services of one namespace.
type serviceAccess struct {
	cache  serviceLister
	client serviceWriter
}

// The wrangler types that Register passes satisfy the narrow interfaces.
var (
	_ shardConfigMap   = corecontrollers.ConfigMapController(nil)
	_ statusStore      = corecontrollers.ConfigMapClient(nil)
	_ deploymentWriter = appscontrollers.DeploymentClient(nil)
	_ deploymentLister = appscontrollers.DeploymentCache(nil)
	_ serviceWriter    = corecontrollers.ServiceClient(nil)
	_ serviceLister    = corecontrollers.ServiceCache(nil)
)
