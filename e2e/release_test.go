//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// chartVersions are the version fields of the chart's Chart.yaml.
type chartVersions struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

// helmIndex is what a Helm repository's index.yaml says of each chart.
type helmIndex struct {
	Entries map[string][]struct {
		chartVersions
		URLs   []string `json:"urls"`
		Digest string   `json:"digest"`
	} `json:"entries"`
}

// TestChartRepository packages the chart with `make chart-package`, as the
// release workflow does, serves the directory over HTTP as GitHub Pages
// would, and uses it as a Helm user (and Rancher's HTTP ClusterRepo) would:
// the index lists the chart at its version with the package's digest, and the
// chart installed from it renders the image of its appVersion.
func TestChartRepository(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var chart chartVersions
	require.NoError(t, yaml.Unmarshal(b, &chart))

	dist := t.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(dist, "chart"))))
	defer srv.Close()
	mk := exec.CommandContext(t.Context(), "make", "-s", "--no-print-directory", "-C", "..", "chart-package", "DIST="+dist, "CHART_URL="+srv.URL)
	out, err := mk.CombinedOutput()
	require.NoError(t, err, "make chart-package:\n%s", out)

	b, err = os.ReadFile(filepath.Join(dist, "chart", "index.yaml"))
	require.NoError(t, err)
	var index helmIndex
	require.NoError(t, yaml.Unmarshal(b, &index))
	entries := index.Entries["shardkeeper"]
	require.Len(t, entries, 1, "index.yaml:\n%s", b)
	e := entries[0]
	assert.Equal(t, chart, e.chartVersions)
	pkg := fmt.Sprintf("shardkeeper-%s.tgz", chart.Version)
	assert.Equal(t, []string{srv.URL + "/" + pkg}, e.URLs)
	tgz, err := os.ReadFile(filepath.Join(dist, "chart", pkg))
	require.NoError(t, err)
	sum := sha256.Sum256(tgz)
	assert.Equal(t, hex.EncodeToString(sum[:]), e.Digest, "the index's digest is the package's")

	home := t.TempDir()
	helmIn(t, home, "repo", "add", "shardkeeper", srv.URL)
	var found []struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"app_version"`
	}
	require.NoError(t, json.Unmarshal(helmIn(t, home, "search", "repo", "shardkeeper/shardkeeper", "--versions", "-o", "json"), &found))
	require.Len(t, found, 1)
	assert.Equal(t, chart.Version, found[0].Version)
	assert.Equal(t, chart.AppVersion, found[0].AppVersion)

	rendered := helmIn(t, home, "template", "shardkeeper", "shardkeeper/shardkeeper", "--version", chart.Version, "--namespace", "cattle-fleet-system")
	var images []string
	for _, obj := range decodeObjects(t, rendered) {
		if obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			images = append(images, fmt.Sprint(c.(map[string]any)["image"]))
		}
	}
	assert.Equal(t, []string{"ghcr.io/shardkeeper/shardkeeper:" + chart.AppVersion}, images,
		"the packaged chart runs the image of its appVersion")
}
