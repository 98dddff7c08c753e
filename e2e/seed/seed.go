// Package seed creates in a control plane what a cluster with Fleet and
// Flux installed holds and shardkeeper reads: their controllers'
// Deployments, ServiceAccounts and Services (from pkg/testfixture, which
// names the upstream manifests they follow). The demo and the Rancher tier
// start from it; creating what exists already is no error, so that seeding
// is repeatable.
package seed

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// Namespaces creates the namespaces names.
func Namespaces(ctx context.Context, kube kubernetes.Interface, names ...string) error {
	for _, ns := range names {
		if err := IgnoreExists(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	return nil
}

// Controllers creates Fleet's controller Deployments in fleetNS and Flux's
// in fluxNS, with their ServiceAccounts (they run as their own, as
// installed), Fleet's metrics Services and source-controller's Service.
func Controllers(ctx context.Context, kube kubernetes.Interface, fleetNS, fluxNS string) error {
	for _, sa := range append(testfixture.FleetServiceAccounts(fleetNS), testfixture.FluxServiceAccounts(fluxNS)...) {
		if err := IgnoreExists(kube.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("serviceaccount %s: %w", sa.Name, err)
		}
	}
	for _, d := range []*appsv1.Deployment{
		testfixture.FleetController(fleetNS), testfixture.Gitjob(fleetNS), testfixture.HelmOpsController(fleetNS),
		testfixture.SourceController(fluxNS, true), testfixture.KustomizeController(fluxNS, true), testfixture.HelmController(fluxNS, true),
	} {
		if err := IgnoreExists(kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("deployment %s: %w", d.Name, err)
		}
	}
	for _, svc := range append(testfixture.FleetMetricsServices(fleetNS), testfixture.SourceControllerService(fluxNS)) {
		if err := IgnoreExists(kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("service %s: %w", svc.Name, err)
		}
	}
	return nil
}

// IgnoreExists is err of a create, but nil if the object exists already.
func IgnoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
