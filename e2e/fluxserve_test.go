//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	"github.com/stretchr/testify/require"
)

// The Git repository and the Helm repository that the real Flux
// controllers fetch from. Both are served by the test process on the
// loopback interface, which the controllers, processes on the same host,
// reach directly.
const (
	// gitRepoPath is the repository's path on the Git server.
	gitRepoPath = "flux.git"
	// gitBranch is the branch that holds the kustomization.
	gitBranch = "main"
	// gitConfigMap is the ConfigMap that the kustomization in Git applies.
	gitConfigMap = "from-git"
	// chartName and chartVersion name the one chart of the Helm repository.
	chartName    = "hello"
	chartVersion = "0.1.0"
	// chartConfigMapSuffix ends the name of the ConfigMap the chart
	// installs: the release's name comes first.
	chartConfigMapSuffix = "-from-helm"
)

// gitFiles are the files of the repository's one commit: a kustomization
// that applies a ConfigMap.
var gitFiles = map[string]string{
	"kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - configmap.yaml
`,
	"configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + gitConfigMap + `
data:
  source: git
`,
}

// chartFiles are the files of the chart, by their path inside it.
var chartFiles = map[string]string{
	"Chart.yaml": `apiVersion: v2
name: ` + chartName + `
version: ` + chartVersion + `
description: A ConfigMap, for the end-to-end tests.
type: application
`,
	"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}` + chartConfigMapSuffix + `
data:
  chart: {{ .Chart.Name }}
`,
}

// serveGit starts a Git server over HTTP holding gitFiles on gitBranch, and
// returns the repository's URL.
func serveGit(t *testing.T) string {
	t.Helper()
	fixture := t.TempDir()
	for name, content := range gitFiles {
		require.NoError(t, os.WriteFile(filepath.Join(fixture, name), []byte(content), 0o600))
	}
	srv, err := gittestserver.NewTempGitServer()
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(srv.Root()) })
	require.NoError(t, srv.InitRepo(fixture, gitBranch, gitRepoPath))
	require.NoError(t, srv.StartHTTP())
	t.Cleanup(srv.StopHTTP)
	return srv.HTTPAddress() + "/" + gitRepoPath
}

// serveHelmRepository starts a Helm repository over HTTP holding the chart
// of chartFiles, and returns its URL.
func serveHelmRepository(t *testing.T) string {
	t.Helper()
	chart, err := packageChart(chartName, chartFiles)
	require.NoError(t, err)
	archive := fmt.Sprintf("/%s-%s.tgz", chartName, chartVersion)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	index := chartIndex(srv.URL+archive, chart)
	mux.HandleFunc("/index.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(index)
	})
	mux.HandleFunc(archive, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(chart)
	})
	return srv.URL
}

// packageChart is what `helm package` writes: a gzipped tar whose entries
// sit under a directory named after the chart.
func packageChart(name string, files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	// In a stable order, so that the same files give the same digest.
	for _, path := range slices.Sorted(maps.Keys(files)) {
		content := files[path]
		hdr := &tar.Header{Name: name + "/" + path, Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar header %s: %w", path, err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			return nil, fmt.Errorf("tar %s: %w", path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close tar: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("close gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// chartIndex is the repository's index.yaml, listing the one chart at url.
func chartIndex(url string, chart []byte) []byte {
	sum := sha256.Sum256(chart)
	now := time.Now().UTC().Format(time.RFC3339)
	return fmt.Appendf(nil, `apiVersion: v1
entries:
  %s:
    - apiVersion: v2
      name: %s
      version: %s
      type: application
      created: %q
      digest: %s
      urls:
        - %s
generated: %q
`, chartName, chartName, chartVersion, now, hex.EncodeToString(sum[:]), url, now)
}
