# shardkeeper: `make help` lists the targets.

SHELL := /bin/bash
comma := ,
.DEFAULT_GOAL := help

VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN        := $(CURDIR)/bin
KUBE_VER   = $(shell awk '$$1 == "k8s.io/kubernetes" {print $$2}' e2e/tools/go.mod)
GO_LDFLAGS := -s -w -X github.com/shardkeeper/shardkeeper/pkg/version.Version=$(VERSION)
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VER)
CONTROL_PLANE := $(BIN)/etcd $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kwok $(BIN)/kwok-stages/.done
DEMO_DIR   := $(CURDIR)/.demo
E2E_TIMEOUT ?= 45m
FUZZ_TIME  ?= 1m

export SHARDKEEPER_BIN_DIR := $(BIN)

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/shardkeeper, and bin/kubectl-shardkeeper (the kubectl plugin: a link to it).
	CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags '$(GO_LDFLAGS)' -o $(BIN)/shardkeeper .
	ln -sf shardkeeper $(BIN)/kubectl-shardkeeper

# --- release ---
# One tag vX.Y.Z versions everything: the binary (--version), the image's tag,
# the chart's appVersion (the tag its image defaults to) and, without the "v",
# the chart's version. version-check holds them together in a release build.
IMAGE       ?= ghcr.io/shardkeeper/shardkeeper:$(VERSION)
PLATFORMS   ?= linux/amd64,linux/arm64
BUILDER     ?= shardkeeper
PUSH        ?= false
DIST        ?= $(CURDIR)/dist
CHART_URL   ?= https://github.com/shardkeeper/shardkeeper/releases/download/$(VERSION)
INDEX_MERGE ?=
ACTIONLINT_VER := v1.7.12

.PHONY: cross
cross: ## Cross-compile bin/<os>_<arch>/shardkeeper for each of $(PLATFORMS), with the image's build flags.
	@set -e; for p in $(subst $(comma), ,$(PLATFORMS)); do \
	  os=$${p%/*}; arch=$${p#*/}; echo "go build for $$os/$$arch"; \
	  CGO_ENABLED=0 GOWORK=off GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags '$(GO_LDFLAGS)' -o $(BIN)/$${os}_$${arch}/shardkeeper .; \
	done

# A multi-platform image cannot be loaded into the local image store, so it
# is pushed (PUSH=true) or written as an OCI archive, which skopeo or crane
# can copy into any registry.
.PHONY: image
image: ## Build the multi-arch image $(IMAGE) for $(PLATFORMS) with docker buildx: PUSH=true pushes it, otherwise it goes to dist/ as an OCI archive.
	@missing=; \
	  if ! command -v docker >/dev/null; then missing="docker (https://docs.docker.com/engine/install/)"; \
	  elif ! docker buildx version >/dev/null 2>&1; then missing="the docker buildx plugin (https://docs.docker.com/build/install-buildx/)"; \
	  elif ! docker info >/dev/null 2>&1; then missing="a running docker daemon (docker info fails)"; fi; \
	  if [ -n "$$missing" ]; then \
	    echo "make image needs $$missing; it is not available here."; \
	    echo "make cross checks the cross-compile for $(PLATFORMS) without it."; exit 1; fi
	@docker buildx inspect $(BUILDER) >/dev/null 2>&1 || docker buildx create --name $(BUILDER) --driver docker-container >/dev/null
	@mkdir -p $(DIST)
	docker buildx build --builder $(BUILDER) --platform $(PLATFORMS) --build-arg VERSION=$(VERSION) -t $(IMAGE) \
	  $(if $(filter true,$(PUSH)),--push,--output type=oci$(comma)dest=$(DIST)/shardkeeper-$(VERSION).oci.tar) .

.PHONY: version-check
version-check: ## With a release VERSION (vX.Y.Z), fail unless the chart's version and appVersion, CHANGELOG.md and the stamped binary all say it.
	@v='$(VERSION)'; \
	  if ! [[ $$v =~ ^v[0-9]+\.[0-9]+\.[0-9]+$$ ]]; then echo "VERSION=$$v is not a release (vX.Y.Z): nothing to check"; exit 0; fi; \
	  chart=$$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' $(CHART)/Chart.yaml); \
	  app=$$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' $(CHART)/Chart.yaml); \
	  tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags '$(GO_LDFLAGS)' -o $$tmp/shardkeeper . || exit 1; \
	  bin=$$($$tmp/shardkeeper --version); fail=; \
	  [ "$$chart" = "$${v#v}" ] || { echo "$(CHART)/Chart.yaml: version is $$chart, the release $$v needs $${v#v}"; fail=1; }; \
	  [ "$$app" = "$$v" ] || { echo "$(CHART)/Chart.yaml: appVersion is $$app, the release needs $$v"; fail=1; }; \
	  [ "$$bin" = "$$v" ] || { echo "shardkeeper --version prints $$bin, the release needs $$v"; fail=1; }; \
	  grep -q "^## $$v\b" CHANGELOG.md || { echo "CHANGELOG.md: no section '## $$v'"; fail=1; }; \
	  [ -z "$$fail" ] || exit 1; \
	  echo "$$v: the chart's version and appVersion, CHANGELOG.md and shardkeeper --version agree"

.PHONY: changelog
changelog: ## Print the CHANGELOG.md section of VERSION, the release's notes.
	@awk -v v='$(VERSION)' '/^## / {on = ($$2 == v); found = found || on; next} on {print} END {exit !found}' CHANGELOG.md || \
	  { echo "CHANGELOG.md has no section '## $(VERSION)'" >&2; exit 1; }

.PHONY: chart-package
chart-package: $(BIN)/helm ## Package the chart into dist/chart and write its Helm repository index (CHART_URL: where the packages are served; INDEX_MERGE: an index to extend).
	@rm -rf $(DIST)/chart && mkdir -p $(DIST)/chart
	$(HELM) package $(CHART) --destination $(DIST)/chart
	$(HELM) repo index $(DIST)/chart --url $(CHART_URL) $(if $(INDEX_MERGE),--merge $(INDEX_MERGE))

$(BIN)/actionlint:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VER)

.PHONY: workflows-lint
workflows-lint: $(BIN)/actionlint ## Lint .github/workflows with actionlint; fail on an action not pinned by commit (this repository's own workflows aside).
	$(BIN)/actionlint -no-color
	@bad=$$(grep -nE '^[[:space:]-]*uses:' .github/workflows/*.yml | grep -vE 'uses: *([^@ ]+@[0-9a-f]{40} +# v[0-9]|\./)' || true); \
	  if [ -n "$$bad" ]; then echo "actions must be pinned by commit, with the version as a comment:"; echo "$$bad"; exit 1; fi; \
	  echo "every action is pinned by commit"

# release-test builds the release of the chart's appVersion, which must pass
# version-check, and one of a version the chart does not carry, which must not.
.PHONY: release-test
release-test: cross workflows-lint ## Check the release path: the cross-compile, the workflows, and version-check on a release build.
	@app=$$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' $(CHART)/Chart.yaml); \
	  $(MAKE) -s --no-print-directory version-check VERSION=$$app || exit 1; \
	  if out=$$($(MAKE) -s --no-print-directory version-check VERSION=v0.0.0 2>&1); then \
	    echo "version-check passed the release v0.0.0, which the chart is not"; exit 1; fi; \
	  grep -q 'appVersion is' <<<"$$out" || { echo "version-check refused v0.0.0, but not for the chart's appVersion:"; echo "$$out"; exit 1; }; \
	  echo "version-check refuses a release the chart does not carry"

.PHONY: control-plane
control-plane: $(CONTROL_PLANE) ## Build the local control plane's binaries into bin/ (cached).

# The control plane, kwok, kubectl and helm are built from the Go module proxy
# in one module of their own (e2e/tools), so that kubernetes' dependency tree
# stays out of go.mod, and so that they share one version of every k8s.io
# library: the build cache compiles each package once, not once per tool.
# e2e/tools is not in go.work (its versions would leak into the daemon's
# build), hence GOWORK=off. Its golang.org/x modules are held at the
# daemon's versions, and everything is built static (CGO_ENABLED=0, as
# Kubernetes' own release builds are) with -trimpath, as the daemon is: the
# daemon's build and the demo's commands then find client-go and the rest
# in the build cache. The binaries are stripped, as Helm's release is:
# linking is a good part of a cold build.
TOOLS       := cd e2e/tools && GOWORK=off CGO_ENABLED=0
TOOLS_DEPS  := e2e/tools/go.mod e2e/tools/go.sum
KUBE_CMDS   := kube-apiserver kube-controller-manager kube-scheduler kubectl
HELM_VER    = $(shell awk '$$1 == "helm.sh/helm/v3" {print $$2}' e2e/tools/go.mod)

# One go build for the control plane, kwok and kubectl: the compiles of all
# of them share both cores, and the links run beside the compiles.
$(addprefix $(BIN)/,etcd $(KUBE_CMDS) kwok) &: $(TOOLS_DEPS) e2e/tools/etcd/main.go
	@mkdir -p $(BIN)
	$(TOOLS) go build -trimpath -ldflags '-s -w $(KUBE_LDFLAGS)' -o $(BIN)/ \
	  ./etcd $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_CMDS)) sigs.k8s.io/kwok/cmd/kwok

$(BIN)/kwok-stages/.done: $(TOOLS_DEPS)
	@mkdir -p $(BIN)/kwok-stages
	d=$$($(TOOLS) go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage; \
	  install -m 0644 $$d/node/fast/node-initialize.yaml $$d/pod/fast/pod-ready.yaml \
	    $$d/pod/fast/pod-complete.yaml $$d/pod/fast/pod-delete.yaml $(BIN)/kwok-stages/
	@touch $@

# check is everything that needs no control plane and no cross-compile: what
# to run before a push. make runs each target once, so test runs check's
# targets once too.
.PHONY: check
check: vet lint test-unit chart-test alerts-test check-manifests ## Run the checks that need no control plane: vet, lint, unit tests, chart, alert rules, manifests.

.PHONY: test
test: check release-test test-e2e ## Run every test: check, the release path, e2e on a local control plane, and the UI extension (ui-test).

# golangci-lint is built from the Go module proxy, pinned; .golangci.yml says
# what it checks. It lints each module on its own (GOWORK=off): the daemon's
# as the daemon is built, then bench and e2e (with the e2e tests' tag).
GOLANGCI_LINT_VER := v2.15.0

$(BIN)/golangci-lint:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VER)

.PHONY: lint
lint: $(BIN)/golangci-lint ## Run golangci-lint on the daemon, bench and e2e (.golangci.yml; the binary is cached in bin/, delete it to rebuild).
	GOWORK=off $(BIN)/golangci-lint run ./...
	cd bench && GOWORK=off $(BIN)/golangci-lint run ./...
	cd e2e && GOWORK=off $(BIN)/golangci-lint run --build-tags e2e,rancher ./...

# In the workspace (go.work) ./... is the product's module alone: bench and
# e2e are modules of their own, so every go vet and go test names them.
.PHONY: vet
vet: ## Check formatting and run go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./... ./bench/...
	go vet -tags e2e,rancher ./e2e/...

.PHONY: test-unit
test-unit: $(BIN)/helm ## Run the unit tests (pure logic, fuzz seed corpora included; docs/security.md's rights against the chart, with Helm).
	go test -race -count=1 ./... ./bench/... ./e2e/...

.PHONY: test-e2e
test-e2e: $(CONTROL_PLANE) $(BIN)/kubectl $(BIN)/promtool build ## Run the e2e tests against a real kube-apiserver, etcd, controller-manager, scheduler and kwok.
	SHARDKEEPER_BINARY=$(BIN)/shardkeeper go test -tags e2e -p 1 -count=1 -timeout $(E2E_TIMEOUT) ./e2e/...

# TestUpgradeFromV010 upgrades from v0.1.0 (commit $(V010_COMMIT), which a
# full clone has): its daemon and chart, built once from its tree into bin/.
V010_COMMIT := 8682fbc
$(BIN)/v0.1.0/shardkeeper:
	@git cat-file -e '$(V010_COMMIT)^{commit}' 2>/dev/null || { echo "v0.1.0 (commit $(V010_COMMIT)) is not in this clone: fetch the whole history"; exit 1; }
	rm -rf $(@D) && mkdir -p $(@D) && git archive $(V010_COMMIT) go.mod go.sum main.go pkg charts/shardkeeper | tar -x -C $(@D)
	cd $(@D) && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags '-s -w -X github.com/shardkeeper/shardkeeper/pkg/version.Version=v0.1.0' -o $@ .
test-e2e: $(BIN)/v0.1.0/shardkeeper

.PHONY: fuzz
fuzz: ## Fuzz the ConfigMap parsers, the renderer, placement and failover, $(FUZZ_TIME) each; crashes land in testdata/fuzz as seed cases.
	go test ./pkg/shardconfig -run '^$$' -fuzz FuzzParseShards -fuzztime $(FUZZ_TIME)
	go test ./pkg/render -run '^$$' -fuzz FuzzRender -fuzztime $(FUZZ_TIME)
	go test ./pkg/shardconfig -run '^$$' -fuzz FuzzParsePlacement -fuzztime $(FUZZ_TIME)
	go test ./pkg/balance -run '^$$' -fuzz FuzzMoves -fuzztime $(FUZZ_TIME)
	go test ./pkg/plan -run '^$$' -fuzz FuzzFailover -fuzztime $(FUZZ_TIME)

SOAK_RUNS ?= 20

# The timeout bounds a hang, at 4 minutes a seed: one takes about 20 s.
# soakreport shows each test as it ends and, at the end, the whole output of
# every test that failed.
.PHONY: soak
soak: $(CONTROL_PLANE) build $(BIN)/helm ## Run the crash storm with $(SOAK_RUNS) random seeds and the control-plane faults again and again.
	set -o pipefail; SHARDKEEPER_CRASH_SEEDS=$$(for i in $$(seq 1 $(SOAK_RUNS)); do printf '%s%s,' $$RANDOM $$RANDOM; done | sed 's/,$$//') \
	  SHARDKEEPER_BINARY=$(BIN)/shardkeeper go test -tags e2e -count=1 -timeout $$(( 10 + 4 * $(SOAK_RUNS) ))m -json \
	  -run 'TestCrashDuringEditStorm|TestControlPlaneFaults' ./e2e/ 2>&1 | go run ./e2e/cmd/soakreport

.PHONY: run
run: build ## Run shardkeeper against the current kubeconfig (ARGS="--preset fleet,flux ...").
	$(BIN)/shardkeeper $(ARGS)

.PHONY: demo
demo: $(CONTROL_PLANE) $(BIN)/kubectl $(BIN)/helm build ## Start a local control plane with shardkeeper running on it, and print how to drive it.
	@./e2e/demo.sh up "$(DEMO_DIR)"

.PHONY: demo-down
demo-down: ## Stop everything `make demo` started.
	@./e2e/demo.sh down "$(DEMO_DIR)"

# --- chart ---
# Helm is built from e2e/tools, pinned there, with the ldflags of Helm's own
# release build: without them `helm template` and `helm lint` take the
# cluster for Kubernetes v1.20 and refuse the chart's kubeVersion. The k8s.io
# modules it is built with are those of e2e/tools, the control plane's.
HELM_K8S_MINOR := $(word 2,$(subst ., ,$(KUBE_VER)))
HELM_LDFLAGS   := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VER) \
  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR) \
  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR)
CHART          := charts/shardkeeper
CHART_NS       := cattle-fleet-system
# Helm's caches and settings stay under bin/, away from the user's own.
HELM           := HELM_CACHE_HOME=$(BIN)/.helm/cache HELM_CONFIG_HOME=$(BIN)/.helm/config HELM_DATA_HOME=$(BIN)/.helm/data $(BIN)/helm
# Values that the chart must refuse: by its schema, and by its templates.
CHART_SCHEMA_REFUSES   := 'shards=Bad_ID' 'shards=a-very-long-shard-id-of-more-than-forty-chars' 'shards={shard0,Bad_ID}' \
  'replicaCount=two' 'logLevel=trace' 'presets.flux.namespace=Flux_System' 'shards[0].id=gpu,shards[0].image=evil' 'unknownKey=1' \
  'resources.limits.memory=lots' 'extraSourceMetricsServices[0]=no-service-named' 'extraSourceRequiredArgs[0]=ns/name=not-a-flag' \
  'placement.failoverAfter=soon' 'presets.flux.shardKey=Sharding.fluxcd.io/key' 'presets.flux.shardKey=sharding.fluxcd.io/' \
  'kubeAPI.initialList=watch'
CHART_TEMPLATE_REFUSES := 'presets.fleet.enabled=false' 'leaderElection.enabled=false' 'metrics.serviceMonitor.enabled=true' \
  'metrics.prometheusRule.enabled=true' 'metrics.dashboard.enabled=true' \
  'image.repository=ghcr.io/shardkeeper/shardkeeper' 'shards=a-thirty-character-shard-id-xy' \
  'presets.fleet.enabled=false,presets.flux.enabled=true,shards=a-thirty-six-character-flux-shard-id'
# chart-refuses checks that helm template refuses each --set value of $(1)
# with an error containing $(2): refused by $(3), not by something else.
chart-refuses = for bad in $(1); do \
  if out=$$($(HELM) template shardkeeper $(CHART) --set "$$bad" 2>&1); then \
    echo "helm template --set $$bad: accepted, but $(3) must refuse it"; exit 1; fi; \
  if ! grep -q "$(2)" <<<"$$out"; then \
    echo "helm template --set $$bad: refused, but not by $(3):"; echo "$$out"; exit 1; fi; \
  echo "refused by $(3): --set $$bad"; \
done

.PHONY: helm
helm: $(BIN)/helm ## Build bin/helm, the pinned Helm (cached; delete it to rebuild).

$(BIN)/helm: $(TOOLS_DEPS)
	@mkdir -p $(BIN)
	$(TOOLS) go build -trimpath -ldflags '$(HELM_LDFLAGS)' -o $(BIN)/helm helm.sh/helm/v3/cmd/helm

.PHONY: chart-test
chart-test: $(BIN)/helm ## Lint and render the Helm chart with every values set in charts/shardkeeper/ci/ and with 0.1.0's values (--reuse-values); check that bad values are refused and docs/security.md's RBAC table.
	$(HELM) lint --strict $(CHART)
	@set -e; for f in $(CHART)/ci/*-values.yaml; do \
	  echo "helm lint --strict + helm template -f $$f"; \
	  $(HELM) lint --strict --quiet $(CHART) -f $$f >/dev/null; \
	  $(HELM) template shardkeeper $(CHART) --namespace $(CHART_NS) -f $$f >/dev/null; \
	done
	@n=$$($(HELM) template shardkeeper $(CHART) --api-versions $(VAP_API) | grep -c '^kind: ValidatingAdmissionPolicy'); \
	  [ "$$n" = 4 ] || { echo "with $(VAP_API) served: $$n admission policies and bindings rendered, want 4"; exit 1; }; \
	  n=$$($(HELM) template shardkeeper $(CHART) --api-versions $(VAP_API) --set admissionPolicy.removalWarning=false | grep -c '^kind: ValidatingAdmissionPolicy'); \
	  [ "$$n" = 2 ] || { echo "with admissionPolicy.removalWarning=false: $$n admission policies and bindings rendered, want 2"; exit 1; }; \
	  for off in '' '--set admissionPolicy.enabled=false --api-versions $(VAP_API)'; do \
	    n=$$($(HELM) template shardkeeper $(CHART) $$off | grep -c '^kind: ValidatingAdmissionPolicy' || true); \
	    [ "$$n" = 0 ] || { echo "helm template $$off: $$n admission policies rendered, want none"; exit 1; }; \
	  done; echo "admission policies: rendered only where the cluster serves them and the value allows"
	@$(HELM) template shardkeeper $(CHART) --show-only templates/configmap.yaml --set placement.enabled=true \
	    --set placement.failoverAfter=5m | grep -qF 'placement: "failoverAfter: 5m\n"' || \
	  { echo "placement.failoverAfter=5m does not seed the ConfigMap's placement key"; exit 1; }; \
	  if $(HELM) template shardkeeper $(CHART) --show-only templates/configmap.yaml | grep -q 'placement:'; then \
	    echo "a placement key rendered without placement.failoverAfter"; exit 1; fi; \
	  echo "placement.failoverAfter: seeds the placement key, and only then"
	@flux='--set presets.fleet.enabled=false --set presets.flux.enabled=true'; \
	  if $(HELM) template shardkeeper $(CHART) --show-only templates/deployment.yaml | grep -q -- '--flux-shard-key'; then \
	    echo "--flux-shard-key rendered without presets.flux"; exit 1; fi; \
	  $(HELM) template shardkeeper $(CHART) --show-only templates/deployment.yaml $$flux --set presets.flux.shardKey=example.com/shard | \
	    grep -qF -- '- --flux-shard-key=example.com/shard' || { echo "presets.flux.shardKey is not passed as --flux-shard-key"; exit 1; }; \
	  $(HELM) template shardkeeper $(CHART) $$flux --set shards=a-thirty-five-char-flux-shard-id-xy >/dev/null || \
	    { echo "a 35-character shard ID refused with the Flux preset alone"; exit 1; }; \
	  rbac=$$($(HELM) template shardkeeper $(CHART) --show-only templates/rbac.yaml $$flux --set placement.enabled=true); \
	  for want in 'resources: ["buckets","gitrepositories","helmcharts","helmrepositories","ocirepositories"]' \
	    'resources: ["kustomizations"]' 'resources: ["imagepolicies","imagerepositories","imageupdateautomations"]' \
	    'resources: ["artifactgenerators"]' 'resources: [services]'; do \
	    grep -qF -- "$$want" <<<"$$rbac" || { echo "with presets.flux: no rule with $$want"; exit 1; }; done; \
	  grep -A1 -F 'resources: ["helmreleases"]' <<<"$$rbac" | grep -qF 'verbs: [get, list, watch, patch]' || \
	    { echo "with presets.flux and placement: HelmReleases not readable and patchable"; exit 1; }; \
	  echo "presets.flux: --flux-shard-key, 35-character IDs, its kinds and Services in the RBAC"
	@place='--set placement.enabled=true'; \
	  for off in "$$place" "--api-versions $(MAP_API)" "$$place --set placement.stamp.enabled=false --api-versions $(MAP_API)"; do \
	    out=$$($(HELM) template shardkeeper $(CHART) $$off); \
	    if grep -qE '^kind: MutatingAdmissionPolicy|--stamp|-stamp"' <<<"$$out"; then \
	      echo "helm template $$off: the stamping policy, --stamp or its RBAC rendered, want none"; exit 1; fi; \
	  done; \
	  out=$$($(HELM) template shardkeeper $(CHART) $$place --set presets.flux.enabled=true --api-versions $(MAP_API)); \
	  n=$$(grep -cE '^kind: MutatingAdmissionPolicy(Binding)?$$' <<<"$$out"); \
	  [ "$$n" = 4 ] || { echo "with $(MAP_API) served and placement: $$n stamping policies and bindings, want 4 (Fleet's label and Flux's)"; exit 1; }; \
	  for want in '- --stamp' 'resourceNames: ["shardkeeper-stamp"]' 'parameterNotFoundAction: Allow' 'failurePolicy: Ignore'; do \
	    grep -qF -- "$$want" <<<"$$out" || { echo "with the stamping policy: no $$want"; exit 1; }; done; \
	  echo "stamping policy: rendered, with --stamp and its RBAC, only with placement where the cluster serves $(MAP_API)"
	@if $(HELM) template shardkeeper $(CHART) --show-only templates/deployment.yaml | grep -q -- '--initial-list'; then \
	    echo "--initial-list rendered with kubeAPI.initialList at its default"; exit 1; fi; \
	  $(HELM) template shardkeeper $(CHART) --show-only templates/deployment.yaml --set kubeAPI.initialList=stream | \
	    grep -qF -- '- --initial-list=stream' || { echo "kubeAPI.initialList=stream is not passed as --initial-list"; exit 1; }; \
	  echo "kubeAPI.initialList: passed as --initial-list, and only when not auto"
	go test -count=1 -run TestRightsTableIsTheChart ./docs/
	@HELM='$(HELM)' hack/chart-reuse-values.sh $(CHART) e2e/testdata/chart-v0.1.0-values.yaml '' '--set placement.enabled=true' \
	  '--set placement.enabled=true --set presets.flux.enabled=true --api-versions $(MAP_API)'
	@$(call chart-refuses,$(CHART_SCHEMA_REFUSES),don't meet the specifications of the schema,the schema)
	@$(call chart-refuses,$(CHART_TEMPLATE_REFUSES),execution error,the chart's checks)

# --- alerts ---
# promtool is built from the Go module proxy like the other tools; Prometheus
# tags its Go module v0.3XX.Y for its release 3.XX.Y.
PROMETHEUS_VER := v0.316.0
ALERTS         := $(CHART)/files/alerts.yaml

$(BIN)/promtool:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install -trimpath github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VER)

.PHONY: alerts-test
alerts-test: $(BIN)/promtool ## Check the chart's alert rules and run their unit tests (promtool test rules).
	$(BIN)/promtool check rules $(ALERTS)
	$(BIN)/promtool test rules e2e/testdata/alerts-test.yaml

# render-manifests writes the chart rendered with its default values into the
# directory $(1): shardkeeper.yaml holds everything but the shard ConfigMap,
# which goes to shardkeeper-configmap.yaml, to be created once, so that
# applying the manifests again never resets the shard list.
VAP_API := admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy
MAP_API := admissionregistration.k8s.io/v1/MutatingAdmissionPolicy
render-manifests = mkdir -p $(1) && \
  { printf '%s\n' \
      '\# shardkeeper, rendered from charts/shardkeeper with its default values by' \
      '\# `make manifests`: do not edit. Apply it in a cluster where Fleet runs in' \
      '\# cattle-fleet-system, and create the shard ConfigMap once:' \
      '\#   kubectl apply --server-side -f manifests/shardkeeper.yaml' \
      '\#   kubectl create -f manifests/shardkeeper-configmap.yaml' && \
    $(HELM) template shardkeeper $(CHART) --namespace $(CHART_NS) --set configMap.create=false; } > $(1)/shardkeeper.yaml && \
  { printf '%s\n' \
      '\# The shard ConfigMap of manifests/shardkeeper.yaml, rendered by `make manifests`.' \
      '\# Create it once, with `kubectl create -f`, which never overwrites it; then' \
      '\# change the shards with `kubectl patch` (see docs/shards.md).' && \
    $(HELM) template shardkeeper $(CHART) --namespace $(CHART_NS) --show-only templates/configmap.yaml; } > $(1)/shardkeeper-configmap.yaml && \
  { printf '%s\n' \
      '\# The admission policies of manifests/shardkeeper.yaml, rendered by `make manifests`:' \
      '\# they refuse a bad shard list at the prompt and warn when an edit removes a' \
      '\# shard that still has objects. They need Kubernetes 1.30 or later:' \
      '\#   kubectl apply --server-side -f manifests/shardkeeper-admission.yaml' && \
    $(HELM) template shardkeeper $(CHART) --namespace $(CHART_NS) --show-only templates/admissionpolicy.yaml \
      --api-versions $(VAP_API); } > $(1)/shardkeeper-admission.yaml

.PHONY: manifests
manifests: $(BIN)/helm ## Regenerate manifests/ from the Helm chart's default values.
	@$(call render-manifests,manifests)
	@echo "manifests/ regenerated from $(CHART)"

.PHONY: check-manifests
check-manifests: $(BIN)/helm ## Fail if manifests/ differs from a fresh render of the Helm chart.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(call render-manifests,$$tmp) && \
	  if ! diff -ru manifests "$$tmp"; then \
	    echo "manifests/ is out of date with $(CHART): run 'make manifests' and commit the result"; exit 1; \
	  fi

test-e2e: $(BIN)/helm
# --- end chart ---

BENCH_ARGS ?=

.PHONY: bench
bench: $(CONTROL_PLANE) build $(BIN)/helm ## Measure convergence, placement, memory, decision latency, idle API traffic and start-up, each beside a reference; writes bench/results.json and bench/results.md from it (BENCH_ARGS="--objects=10000 --idle=60s" for a shorter run).
	go run ./bench --bin-dir $(BIN) --out bench/results.md $(BENCH_ARGS)

.PHONY: bench-million
bench-million: $(CONTROL_PLANE) build ## The million-object mode of the benchmark (about 45 minutes, not part of `bench`): memory, start-up beside a bare LIST, decision latency and idle API traffic at 1,000,000 mapped objects; writes bench/results-million.md and .json.
	go run ./bench --bin-dir $(BIN) --out bench/results-million.md --million --skip-convergence --skip-placement $(BENCH_ARGS)

.PHONY: clean
clean: ## Remove build output (the cached control plane too).
	rm -rf $(BIN) $(DEMO_DIR)

# --- flux controllers ---
# Flux's own source-, kustomize- and helm-controller, at the versions Flux
# v2.9.5 ships, built from the Go module proxy as the control plane is
# (static, -trimpath, stripped), each rebuilt when its go.mod or go.sum
# changes. Each has a module of its own under e2e/fluxtools, out of go.work
# (GOWORK=off), so that each is built with the versions its own go.mod
# selects: they disagree on go-digest, for one.
FLUX_CONTROLLERS := source-controller kustomize-controller helm-controller

.PHONY: flux-controllers
flux-controllers: $(addprefix $(BIN)/,$(FLUX_CONTROLLERS)) ## Build Flux v2.9.5's source-, kustomize- and helm-controller into bin/ (cached).

$(addprefix $(BIN)/,$(FLUX_CONTROLLERS)): $(BIN)/%: e2e/fluxtools/%/go.mod e2e/fluxtools/%/go.sum
	@mkdir -p $(BIN)
	cd e2e/fluxtools/$* && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $@ github.com/fluxcd/$*

# TestRealFluxControllers runs them as the shards that shardkeeper makes.
test-e2e: $(addprefix $(BIN)/,$(FLUX_CONTROLLERS))

# --- ui ---
# The Rancher UI extension (ui/, docs/ui.md). Shell 3.0.10 and later need
# Node 24: it and yarn 1 come from the npm registry into bin/ (the machine's
# npm only fetches them; Debian's npm where the machine has none). The
# daemon's build never needs any of it.
NODE_VER   := 24.22.3
YARN_VER   := 1.22.22
NODE_ARCH  := $(subst aarch64,arm64,$(subst x86_64,x64,$(shell uname -m)))
NODE_DIR   := $(BIN)/node-$(NODE_VER)
UI_ENV     := PATH=$(NODE_DIR)/node/bin:$(NODE_DIR)/yarn/bin:$$PATH CYPRESS_INSTALL_BINARY=0 SHARDKEEPER_BIN_DIR=$(BIN)
UI_PKG     := shardkeeper-extension
UI_VERSION = $(shell sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' ui/pkg/$(UI_PKG)/package.json)
UI_STAGE   := $(DIST)/extension-chart/$(UI_PKG)
# Headless Chromium's flags: they keep it off the network.
CHROMIUM_FLAGS := --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --hide-scrollbars --window-size=1280,900 --virtual-time-budget=10000

# ui-apt installs Debian's package $(1) unless the command $(2) is there.
UI_SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
ui-apt = command -v $(2) >/dev/null || { $(UI_SUDO) apt-get update -qq && \
  DEBIAN_FRONTEND=noninteractive $(UI_SUDO) apt-get install -y -qq --no-install-recommends $(1) >/dev/null; }

# ui-chromium sets $chromium to a Chromium or Chrome, installing Debian's
# chromium when there is none.
ui-chromium = chromium=$$(command -v chromium || command -v google-chrome || true); \
  if [ -z "$$chromium" ]; then $(call ui-apt,chromium,chromium) && chromium=$$(command -v chromium); fi

# ui-serve starts the test host (ui/test/server.js) on the staged chart's
# files, stopped when the recipe's shell exits; its URL is in $url.
ui-serve = rm -f $(DIST)/ui-server.url; \
  SHARDKEEPER_BIN_DIR=$(BIN) $(NODE_DIR)/node/bin/node ui/test/server.js $(UI_STAGE) > $(DIST)/ui-server.url & \
  pid=$$!; trap 'kill $$pid' EXIT; \
  for i in $$(seq 100); do [ -s $(DIST)/ui-server.url ] && break; sleep 0.1; done; url=$$(cat $(DIST)/ui-server.url)

$(NODE_DIR)/.done:
	@$(call ui-apt,npm,npm)
	@rm -rf $(NODE_DIR) && mkdir -p $(NODE_DIR)/node $(NODE_DIR)/yarn
	cd $(NODE_DIR) && npm pack --silent node-linux-$(NODE_ARCH)@$(NODE_VER) yarn@$(YARN_VER) >/dev/null && \
	  tar -xzf node-linux-$(NODE_ARCH)-$(NODE_VER).tgz -C node --strip-components=1 && \
	  tar -xzf yarn-$(YARN_VER).tgz -C yarn --strip-components=1 && rm -f *.tgz
	@touch $@

ui/node_modules/.done: ui/package.json ui/yarn.lock $(NODE_DIR)/.done
	cd ui && $(UI_ENV) yarn install --frozen-lockfile --non-interactive >$(CURDIR)/ui/yarn-install.log 2>&1 || \
	  { cat ui/yarn-install.log; exit 1; }
	@touch $@

.PHONY: ui-build
ui-build: ui/node_modules/.done ## Build the UI extension with yarn build-pkg (Shell's type check) into dist/extension, laid out as Rancher fetches it.
	cd ui && $(UI_ENV) yarn --silent build-pkg $(UI_PKG) >$(CURDIR)/ui/dist-pkg.log 2>&1 || { cat ui/dist-pkg.log; exit 1; }
	cd ui && $(UI_ENV) node scripts/layout.js dist-pkg/$(UI_PKG)-$(UI_VERSION) $(DIST)/extension
	@echo "bundle: $$(cat $(DIST)/extension/plugin/*.js | wc -c) bytes of JavaScript, $$(cat $(DIST)/extension/plugin/*.js | gzip -9 | wc -c) gzipped"

.PHONY: ui-chart
ui-chart: ui-build ## Stage the extension chart with the built files in dist/extension-chart.
	@rm -rf $(UI_STAGE) && mkdir -p $(dir $(UI_STAGE))
	cp -r charts/$(UI_PKG) $(UI_STAGE) && cp -r $(DIST)/extension $(UI_STAGE)/files

.PHONY: ui-test
ui-test: ui-chart $(BIN)/helm ## Test the UI extension: jest (parsing, page, dialogs; Rancher's fetch and loader on the chart's files), the chart, and the page in headless Chromium.
	$(HELM) lint --strict $(UI_STAGE)
	@$(call ui-apt,busybox,busybox)
	cd ui && $(UI_ENV) yarn --silent jest --ci
	@$(ui-chromium); $(ui-serve); \
	  dom=$$("$$chromium" $(CHROMIUM_FLAGS) --user-data-dir=$(DIST)/chromium-profile --dump-dom "$$url" 2>/dev/null); \
	  grep -q 'data-host="done"' <<<"$$dom" && grep -q '>Blocked<' <<<"$$dom" || \
	    { echo "Chromium: the test host did not render the extension's page:"; grep -o 'data-host="[a-z]*"' <<<"$$dom"; exit 1; }; \
	  echo "Chromium: the built extension loads and renders the Shards page"

.PHONY: ui-package
ui-package: ui-chart $(BIN)/helm ## Package the extension chart into dist/chart beside the daemon's (after chart-package) and index both.
	@mkdir -p $(DIST)/chart
	$(HELM) package $(UI_STAGE) --destination $(DIST)/chart
	$(HELM) repo index $(DIST)/chart --url $(CHART_URL) $(if $(INDEX_MERGE),--merge $(INDEX_MERGE))

test: ui-test
# --- end ui ---

# --- rancher ---
# The Rancher tier (e2e/rancher, docs/ui.md): the user's story in a real
# Rancher v2.15.0 built from the archives in RANCHER_SOURCES, which the Go
# module proxy does not serve (hack/rancher-build.sh names them). Its helm
# operations run with Helm v4, whose flags Rancher passes.
HELM4_VER := v4.3.2

$(BIN)/helm-v4/helm:
	GOBIN=$(@D) CGO_ENABLED=0 go install -trimpath -ldflags '-s -w' helm.sh/helm/v4/cmd/helm@$(HELM4_VER)

.PHONY: test-rancher
test-rancher: $(CONTROL_PLANE) build $(BIN)/helm $(BIN)/helm-v4/helm ui-chart ## Run the user's story in a real Rancher with headless Chromium (RANCHER_SOURCES: the folder of Rancher's archives).
	@$(ui-chromium); hack/rancher-test.sh $(BIN) $(NODE_DIR)/node/bin:$(NODE_DIR)/yarn/bin "$$chromium"
# --- end rancher ---
