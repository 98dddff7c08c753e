//go:build rancher

package rancher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// The repository as the user adds it, and the charts in it.
const (
	repoName  = "shardkeeper"
	repoURL   = "http://" + repoAddr
	extension = "shardkeeper-extension"
)

// TestRancherStory is the user's story in a real Rancher, step by step, as
// a person clicks and types it. Each step checks what the page shows, and
// what the cluster holds where the page says something happened there.
func TestRancherStory(t *testing.T) {
	// A failed run ends with the logs of every process, and CI shows only
	// a run's last lines: what failed is said again after them. Registered
	// first, so it runs last.
	var failure []string
	t.Cleanup(func() {
		if t.Failed() && len(failure) > 0 {
			t.Logf("the story failed:\n%s", strings.Join(failure, "\n"))
		}
	})
	e := startEnv(t)
	b := newBrowser(t, e.cfg)
	b.failure = &failure
	if hold, _ := strconv.Atoi(os.Getenv("RANCHER_HOLD")); hold > 0 {
		t.Logf("holding %ds: Rancher at %s, kubeconfig %s", hold, rancherURL, e.c.KubeconfigPath())
		_ = os.WriteFile(e.cfg.artifacts+"/ready", []byte(e.c.KubeconfigPath()), 0o600)
		time.Sleep(time.Duration(hold) * time.Second)
	}
	s := &story{e: e, b: b, ctx: context.Background()}
	login(t, b)
	// The login page may be loaded while Rancher is still filling its
	// settings: what it reports then is Rancher's start, logged, not judged.
	for _, p := range b.takeProblems() {
		t.Logf("while Rancher started: %s", p)
	}
	for _, st := range s.steps() {
		b.step(st.name, st.run)
	}
	if problems := b.takeProblems(); len(problems) > 0 {
		failure = append(failure, "the pages reported errors:", strings.Join(problems, "\n"))
		t.Errorf("the pages reported errors:\n%s", strings.Join(problems, "\n"))
	}
}

// story is the state the steps share.
type story struct {
	e   *env
	b   *browser
	ctx context.Context
}

type storyStep struct {
	name string
	run  func() error
}

func (s *story) steps() []storyStep {
	return []storyStep{
		{"add the Helm repository", s.addRepository},
		{"install the chart from Apps, Charts", s.installChart},
		{"the app is deployed and its shards are active", s.appDeployed},
		{"install the extension from Extensions", s.installExtension},
		{"Continuous Delivery, Shards lists both shards from the live status", s.shardsPage},
		{"add a shard", s.addShard},
		{"the Shard column of the GitRepo list", s.gitRepoColumn},
		{"the Shard column of the HelmOp list", s.helmOpColumn},
		{"remove the shard: the dialog shows its objects and the policy's warning", s.removeShard},
		{"the shard is Blocked with the daemon's message and its Event", s.shardBlocked},
		{"delete it anyway (force)", s.forceRemoval},
		{"a bad shard ID is refused with the policy's sentence and nothing is saved", s.badShardID},
		{"upgrade the app with a changed value: no shard Deployment is replaced", s.upgradeApp},
	}
}

func (s *story) addRepository() error {
	if err := s.b.open("/dashboard/c/local/apps/catalog.cattle.io.clusterrepo"); err != nil {
		return err
	}
	if err := s.b.click(`[data-testid="masthead-create"]`); err != nil {
		return err
	}
	if err := s.b.typeInto(`[data-testid="name-ns-description-name"] input`, repoName); err != nil {
		return err
	}
	if err := s.b.typeInto(`input[data-testid="clusterrepo-helm-url-input"]`, repoURL); err != nil {
		return err
	}
	if err := s.b.click(`[data-testid="clusterrepo-footer"] button[data-testid="action-button-async-button"]`); err != nil {
		return err
	}
	return s.b.waitXPathText(rowState("app-cluster-repo-list", repoName), "Active")
}

func (s *story) installChart() error {
	if err := s.b.open("/dashboard/c/local/apps/charts"); err != nil {
		return err
	}
	// The app goes to a system namespace, which Rancher's lists hide
	// until the header's filter says otherwise. Chosen before the list is
	// shown: a list already shown did not always follow it.
	if err := s.b.allNamespaces(); err != nil {
		return err
	}
	if err := s.b.typeInto(`input[data-testid="charts-filter-input"]`, "shardkeeper"); err != nil {
		return err
	}
	// The list is drawn again as the filter applies: a click on the card
	// drawn first opens nothing, and is made again, unless the chart's
	// page came up after all.
	const installVersion = `//button[normalize-space()="Install this version"]`
	if err := s.b.retry(func() error {
		text, err := eval[string](s.b, xpathTextScript(installVersion))
		if err != nil {
			return err
		}
		if text == absent {
			if err := s.b.clickWithin(fmt.Sprintf(`[data-testid="item-card-cluster/%s/shardkeeper"]`, repoName), 30*time.Second); err != nil {
				return err
			}
		}
		return s.b.clickXPathWithin(installVersion, 20*time.Second)
	}); err != nil {
		return err
	}
	if err := s.b.clickXPath(`//div[@id="wizard-footer-controls"]//button[normalize-space()="Next"]`); err != nil {
		return err
	}
	if err := s.b.typeInto(`textarea[data-testid="string-input-shards"]`, "shard0,shard1"); err != nil {
		return err
	}
	if err := s.b.click(`a[data-testid="btn-Presets"]`); err != nil {
		return err
	}
	if err := s.b.click(`[data-testid="boolean-input-presets.flux.enabled"] span.checkbox-custom`); err != nil {
		return err
	}
	if err := s.b.click(`#wizard-footer-controls [data-testid="action-button-async-button"]`); err != nil {
		return err
	}
	// Rancher shows Installed Apps next. A list that missed the App's
	// change is loaded again, as a person would reload it.
	deployed := rowState("installed-app-catalog-list", "shardkeeper")
	err := s.b.waitXPathTextWithin(deployed, "Deployed", actionTimeout/2)
	if err == nil {
		return nil
	}
	s.b.t.Logf("again after: %v", err)
	if err := s.b.open("/dashboard/c/local/apps/catalog.cattle.io.app"); err != nil {
		return err
	}
	if err := s.b.allNamespaces(); err != nil {
		return err
	}
	return s.b.waitXPathText(deployed, "Deployed")
}

func (s *story) appDeployed() error {
	if err := waitFor(s.ctx, "the App", func(ctx context.Context) error {
		state, err := s.e.appState(ctx, chartNS, "shardkeeper")
		if err == nil && state != "deployed" {
			err = fmt.Errorf("state %q", state)
		}
		return err
	}); err != nil {
		return err
	}
	return s.e.waitShards(s.ctx, map[string]string{"shard0": "Active", "shard1": "Active"})
}

func (s *story) installExtension() error {
	// The page offers Install only for a version whose kube-version
	// annotation the local cluster meets, and reads the cluster's version
	// once, as it loads: without one, the card's menu says "No actions
	// available" until the page is loaded again.
	if err := s.e.waitLocalClusterVersion(s.ctx); err != nil {
		return err
	}
	card := fmt.Sprintf(`[data-testid="item-card-cluster/%s/%s"]`, repoName, extension)
	if err := s.b.open("/dashboard/c/local/uiplugins#available"); err != nil {
		return err
	}
	// The page settles after it shows the card (a banner comes in above
	// it, the main menu may slide in): a click that missed is made again,
	// on the page loaded again (a navigation to the address shown would
	// be no reload).
	if err := s.b.retryFrom(s.b.reload, func() error {
		if err := s.b.closeMainMenu(); err != nil {
			return err
		}
		if err := s.b.clickWithin(card+` [data-testid="item-card-header-action-menu"]`, 30*time.Second); err != nil {
			return fmt.Errorf("the card's menu: %w", err)
		}
		if err := s.b.clickXPathWithin(`//*[@dropdown-menu-item][normalize-space()="Install"]`, 10*time.Second); err != nil {
			return fmt.Errorf("the menu's Install: %w", err)
		}
		// A menu item clicked as the menu closed opens no dialog.
		if err := s.b.clickWithin(`button[data-testid="install-ext-modal-install-btn"]`, 20*time.Second); err != nil {
			return fmt.Errorf("the dialog's Install: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.b.click(`button[data-testid="extension-reload-banner-reload-btn"]`); err != nil {
		return err
	}
	if err := waitFor(s.ctx, "the extension's App", func(ctx context.Context) error {
		state, err := s.e.appState(ctx, "cattle-ui-plugin-system", extension)
		if err == nil && state != "deployed" {
			err = fmt.Errorf("state %q", state)
		}
		return err
	}); err != nil {
		return err
	}
	// Rancher serves the extension's files from its own cache, which it
	// fills from the chart's file server once that answers, retrying 10 s
	// after a failure (pkg/controllers/dashboard/plugin/controller.go); a
	// page loaded before then gets 403 for the script and does not try it
	// again. The next step loads a page afresh.
	return waitFor(s.ctx, "Rancher's cache of the extension", func(ctx context.Context) error {
		return s.e.pluginCached(ctx, extension)
	})
}

func (s *story) shardsPage() error {
	if err := s.b.openShards(); err != nil {
		return err
	}
	return s.b.waitRows(map[string]string{"shard0": "Active", "shard1": "Active"})
}

func (s *story) addShard() error {
	if err := s.b.openShards(); err != nil {
		return err
	}
	if err := s.b.click(`[data-testid="sk-add"]`); err != nil {
		return err
	}
	if err := s.b.typeInto(`[data-testid="sk-add-id"]`, "shard2"); err != nil {
		return err
	}
	if err := s.b.click(`[data-testid="sk-add-save"]`); err != nil {
		return err
	}
	if err := s.b.clickOptional(`[data-testid="sk-add-close"]`); err != nil {
		return err
	}
	if err := s.b.waitRows(map[string]string{"shard0": "Active", "shard1": "Active", "shard2": "Active"}); err != nil {
		return err
	}
	return waitFor(s.ctx, "shard2's Deployments", func(ctx context.Context) error {
		names, err := s.e.shardDeploymentNames(ctx, "shard2")
		if err == nil && len(names) == 0 {
			err = errors.New("none")
		}
		return err
	})
}

func (s *story) gitRepoColumn() error {
	// A GitRepo and a HelmOp of shard2, as a user's GitOps would create them.
	if err := s.e.createObjects(s.ctx, "shard2"); err != nil {
		return err
	}
	if err := s.b.open("/dashboard/c/_/fleet/fleet.cattle.io.gitrepo"); err != nil {
		return err
	}
	return s.b.waitScript("the Shard cell of GitRepo payments", cellScript("payments", "Shard"), "^shard2$")
}

func (s *story) helmOpColumn() error {
	if err := s.b.open("/dashboard/c/_/fleet/fleet.cattle.io.helmop"); err != nil {
		return err
	}
	return s.b.waitScript("the Shard cell of HelmOp ingress", cellScript("ingress", "Shard"), "^shard2$")
}

func (s *story) removeShard() error {
	if err := s.b.openShards(); err != nil {
		return err
	}
	if err := s.b.waitRowMapped("shard2", "1 gitrepos"); err != nil {
		return err
	}
	if err := s.b.click(`[data-testid="sk-remove-shard2"]`); err != nil {
		return err
	}
	if err := s.b.waitXPathText(`//*[@data-testid="sk-remove-objects"]`, objectNS+"/payments"); err != nil {
		return err
	}
	if err := s.b.click(`[data-testid="sk-remove-save"]`); err != nil {
		return err
	}
	return s.b.waitXPathText(`//*[@data-testid="sk-remove-warning"]`, "shard2")
}

func (s *story) shardBlocked() error {
	if err := s.b.closeDialog(); err != nil {
		return err
	}
	if err := s.b.waitRows(map[string]string{"shard0": "Active", "shard1": "Active", "shard2": "Blocked"}); err != nil {
		return err
	}
	if err := s.b.waitXPathText(`//*[@data-testid="sk-row-shard2"]`, "still|mapped"); err != nil {
		return err
	}
	return s.b.waitXPathText(`//*[@data-testid="sk-events"]`, "ShardDeletionBlocked")
}

func (s *story) forceRemoval() error {
	// The dialog saves what the page read last: an edit that came in
	// between (the daemon's, say) makes the save fail with a conflict,
	// which the dialog shows; a person reads it and tries again.
	if err := s.b.retry(func() error {
		if err := s.b.closeDialog(); err != nil {
			return err
		}
		// The removal's warning stays in a growl over the page, where a
		// click meant for the dialog below it can land.
		if err := s.b.closeGrowls(); err != nil {
			return err
		}
		if err := s.b.clickWithin(`[data-testid="sk-force-shard2"]`, 30*time.Second); err != nil {
			return err
		}
		if err := s.b.click(`[data-testid="sk-remove-force"]`); err != nil {
			return err
		}
		// Saved unticked, the removal is only saved again, with its warning.
		ticked, err := eval[bool](s.b, `!!(document.querySelector('[data-testid="sk-remove-force"]') || {}).checked`)
		if err != nil {
			return err
		}
		if !ticked {
			return errors.New("the force box is not ticked")
		}
		if err := s.b.click(`[data-testid="sk-remove-save"]`); err != nil {
			return err
		}
		// Saved without a warning, the dialog closes by itself.
		const outcome = `(document.querySelector('[role="dialog"]') || {innerText: "closed"}).innerText`
		if err := s.b.waitScript("the dialog's outcome", outcome, "^closed$|Saved|Not saved"); err != nil {
			return err
		}
		if refusal, _ := eval[string](s.b, `(document.querySelector('[data-testid="sk-remove-refusal"]') || {}).innerText || ""`); refusal != "" {
			return fmt.Errorf("the dialog says: %s", refusal)
		}
		return s.b.closeDialog()
	}); err != nil {
		return err
	}
	if err := s.b.waitRows(map[string]string{"shard0": "Active", "shard1": "Active"}); err != nil {
		return err
	}
	if err := s.b.waitXPathText(`//*[@data-testid="sk-events"]`, "ShardForceDeleted"); err != nil {
		return err
	}
	return waitFor(s.ctx, "shard2's Deployments gone", func(ctx context.Context) error {
		names, err := s.e.shardDeploymentNames(ctx, "shard2")
		if err == nil && len(names) > 0 {
			err = fmt.Errorf("still there: %v", names)
		}
		return err
	})
}

func (s *story) badShardID() error {
	before, err := s.e.kube.CoreV1().ConfigMaps(chartNS).Get(s.ctx, "shardkeeper", metav1.GetOptions{})
	if err != nil {
		return err
	}
	// Rancher shows the API server's warning of the removal in a growl
	// too, over the page's buttons, until it is closed.
	if err := s.b.closeGrowls(); err != nil {
		return err
	}
	if err := s.b.click(`[data-testid="sk-add"]`); err != nil {
		return err
	}
	if err := s.b.typeInto(`[data-testid="sk-add-id"]`, "Bad_ID"); err != nil {
		return err
	}
	if err := s.b.click(`[data-testid="sk-add-save"]`); err != nil {
		return err
	}
	if err := s.b.waitXPathText(`//*[@data-testid="sk-add-refusal"]`, "Bad_ID"); err != nil {
		return err
	}
	after, err := s.e.kube.CoreV1().ConfigMaps(chartNS).Get(s.ctx, "shardkeeper", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if after.ResourceVersion != before.ResourceVersion {
		return fmt.Errorf("the shard ConfigMap changed: %q became %q", before.Data["shards"], after.Data["shards"])
	}
	return s.b.clickOptional(`[data-testid="sk-add-close"]`)
}

func (s *story) upgradeApp() error {
	before, err := s.e.shardDeployments(s.ctx)
	if err != nil {
		return err
	}
	const list = "/dashboard/c/local/apps/catalog.cattle.io.app"
	if err := s.b.open(list); err != nil {
		return err
	}
	if err := s.b.allNamespaces(); err != nil {
		return err
	}
	// The list is drawn again once it has loaded, closing a menu opened
	// on the row drawn first, and an item clicked as its menu closes
	// opens no form: the click is made again, from the list, until the
	// form's first page shows.
	if err := s.b.retryFrom(func() error { return s.b.open(list) }, func() error {
		if err := s.b.clickXPathWithin(rowXPath("installed-app-catalog-list", "shardkeeper")+`//button[contains(@data-testid,"-action-button")]`, 30*time.Second); err != nil {
			return err
		}
		if err := s.b.clickXPathWithin(`//*[@dropdown-menu-item][normalize-space()="Edit/Upgrade" or normalize-space()="Edit / Change Version"]`, 10*time.Second); err != nil {
			return err
		}
		return s.b.clickXPathWithin(`//div[@id="wizard-footer-controls"]//button[normalize-space()="Next"]`, 45*time.Second)
	}); err != nil {
		return err
	}
	if err := s.b.click(`a[data-testid="btn-Daemon"]`); err != nil {
		return err
	}
	if err := s.b.typeInto(`input[data-testid="string-input-resources.limits.memory"]`, "320Mi"); err != nil {
		return err
	}
	if err := s.b.click(`#wizard-footer-controls [data-testid="action-button-async-button"]`); err != nil {
		return err
	}
	if err := waitFor(s.ctx, "the upgraded App", func(ctx context.Context) error {
		rev, err := s.e.appRevision(ctx, chartNS, "shardkeeper")
		if err == nil && rev < 2 {
			err = fmt.Errorf("revision %d", rev)
		}
		return err
	}); err != nil {
		return err
	}
	if err := s.e.waitShards(s.ctx, map[string]string{"shard0": "Active", "shard1": "Active"}); err != nil {
		return err
	}
	after, err := s.e.shardDeployments(s.ctx)
	if err != nil {
		return err
	}
	if !maps.Equal(before, after) {
		return fmt.Errorf("shard Deployments were deleted or recreated: before %v, after %v", before, after)
	}
	return nil
}

// createObjects creates a GitRepo and a HelmOp labelled for shard, with
// the fields Fleet's CRDs require.
func (e *env) createObjects(ctx context.Context, shard string) error {
	repo := testfixture.Object(testfixture.GitRepos, objectNS, "payments", source.FleetShardRefLabel, shard)
	repo.Object["spec"] = map[string]any{"repo": "https://git.example.com/payments.git", "paths": []any{"deploy"}}
	op := testfixture.Object(testfixture.HelmOps, objectNS, "ingress", source.FleetShardRefLabel, shard)
	op.Object["spec"] = map[string]any{"helm": map[string]any{"repo": "https://charts.example.com", "chart": "ingress-nginx", "version": "4.12.0"}}
	for gvr, obj := range map[schema.GroupVersionResource]*unstructured.Unstructured{testfixture.GitRepos: repo, testfixture.HelmOps: op} {
		if _, err := e.dyn.Resource(gvr).Namespace(objectNS).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %s: %w", gvr.Resource, obj.GetName(), err)
		}
	}
	return nil
}

// openShards opens the Shards page from Continuous Delivery's menu.
func (b *browser) openShards() error {
	if err := b.open("/dashboard/c/_/fleet"); err != nil {
		return err
	}
	return b.clickXPath(`//nav//a[normalize-space()="Shards"]`)
}

// waitRows waits until the Shards page lists exactly the shards of want,
// each in its state.
func (b *browser) waitRows(want map[string]string) error {
	const script = `JSON.stringify(Object.fromEntries([...document.querySelectorAll('[data-testid^="sk-row-"]')].map(tr => [tr.getAttribute("data-testid").slice(7), (tr.querySelector('[data-testid="sk-state"]') || {}).innerText || ""])))`
	wantJSON, err := json.Marshal(want)
	if err != nil {
		return err
	}
	return b.waitScript("the Shards table", script, "^"+regexp.QuoteMeta(string(wantJSON))+"$")
}

// waitRowMapped waits until a shard's row counts its mapped objects so.
func (b *browser) waitRowMapped(id, text string) error {
	return b.waitXPathText(fmt.Sprintf(`//*[@data-testid="sk-row-%s"]//*[@data-testid="sk-mapped"]`, id), regexp.QuoteMeta(text))
}
