package testfixture

import (
	"embed"
	"fmt"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// fluxCRDFiles are the CustomResourceDefinitions of the Flux kinds the
// fixtures' controllers serve, as their projects publish them; crds/README.md
// names the source and version of each.
//
//go:embed crds/*.yaml
var fluxCRDFiles embed.FS

// FluxCRDs are the real CustomResourceDefinitions of Flux v2.9.5's
// source-controller (GitRepository, OCIRepository, HelmRepository,
// HelmChart, Bucket, ExternalArtifact), kustomize-controller
// (Kustomization) and helm-controller (HelmRelease), one per file under
// crds/, in the order of their file names. Unlike CRD, they carry the full
// schemas, so that the real controllers can run against them.
func FluxCRDs() ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(fluxCRDFiles, "crds/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing the embedded Flux CRDs: %w", err)
	}
	out := make([]*unstructured.Unstructured, 0, len(names))
	for _, name := range names {
		data, err := fluxCRDFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		// Through JSON, as the API machinery decodes it: whole numbers
		// become int64, as unstructured's accessors expect.
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		crd := &unstructured.Unstructured{}
		if err := crd.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		if crd.GetKind() != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s holds a %q, not a CustomResourceDefinition", name, crd.GetKind())
		}
		out = append(out, crd)
	}
	return out, nil
}
