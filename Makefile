# shardkeeper: `make help` lists the targets. A recipe longer than two lines is a
# script in hack/, which `make shellcheck` (part of `make lint`) checks.

SHELL := /bin/bash
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
SOAK_RUNS  ?= 20
BENCH_ARGS ?=

export SHARDKEEPER_BIN_DIR := $(BIN)

.PHONY: help build
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
build: ## Build bin/shardkeeper, and bin/kubectl-shardkeeper (the kubectl plugin: a link to it).
	CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags '$(GO_LDFLAGS)' -o $(BIN)/shardkeeper .
	ln -sf shardkeeper $(BIN)/kubectl-shardkeeper

# --- release ---
# One tag vX.Y.Z versions everything: the binary (--version), the image's tag, the chart's
# appVersion (the tag its image defaults to) and, without the "v", the chart's version.
# version-check holds them together in a release build.
IMAGE       ?= ghcr.io/shardkeeper/shardkeeper:$(VERSION)
PLATFORMS   ?= linux/amd64,linux/arm64
BUILDER     ?= shardkeeper
PUSH        ?= false
DIST        ?= $(CURDIR)/dist
CHART_URL   ?= https://github.com/shardkeeper/shardkeeper/releases/download/$(VERSION)
INDEX_MERGE ?=
ACTIONLINT_VER := v1.7.12
# helm-index indexes the charts in dist/chart as a Helm repository.
helm-index = $(HELM) repo index $(DIST)/chart --url $(CHART_URL) $(if $(INDEX_MERGE),--merge $(INDEX_MERGE))
.PHONY: cross image version-check changelog chart-package workflows-lint release-test
cross: ## Cross-compile bin/<os>_<arch>/shardkeeper for each of $(PLATFORMS), with the image's build flags.
	@GO_LDFLAGS='$(GO_LDFLAGS)' hack/cross.sh $(BIN) $(PLATFORMS)
image: ## Build the multi-arch image $(IMAGE) for $(PLATFORMS) with docker buildx: PUSH=true pushes it, otherwise it goes to dist/ as an OCI archive.
	@IMAGE='$(IMAGE)' PLATFORMS='$(PLATFORMS)' BUILDER='$(BUILDER)' PUSH='$(PUSH)' DIST='$(DIST)' VERSION='$(VERSION)' hack/image.sh
version-check: ## With a release VERSION (vX.Y.Z), fail unless the chart's version and appVersion, CHANGELOG.md and the stamped binary all say it.
	@GO_LDFLAGS='$(GO_LDFLAGS)' hack/version-check.sh '$(VERSION)' $(CHART)
changelog: ## Print the CHANGELOG.md section of VERSION, the release's notes.
	@awk -v v='$(VERSION)' '/^## / {on = ($$2 == v); found = found || on; next} on {print} END {exit !found}' CHANGELOG.md || \
	  { echo "CHANGELOG.md has no section '## $(VERSION)'" >&2; exit 1; }
chart-package: $(BIN)/helm ## Package the chart into dist/chart and write its Helm repository index (CHART_URL: where the packages are served; INDEX_MERGE: an index to extend).
	@rm -rf $(DIST)/chart && mkdir -p $(DIST)/chart
	$(HELM) package $(CHART) --destination $(DIST)/chart && $(helm-index)
$(BIN)/actionlint:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VER)
workflows-lint: $(BIN)/actionlint ## Lint .github/workflows with actionlint; fail on an action not pinned by commit (this repository's own workflows aside).
	$(BIN)/actionlint -no-color
	@hack/actions-pinned.sh
# release-test builds the release of the chart's appVersion, which must pass version-check,
# and one of a version the chart does not carry, which must not.
release-test: cross workflows-lint ## Check the release path: the cross-compile, the workflows, and version-check on a release build.
	@GO_LDFLAGS='$(GO_LDFLAGS)' hack/release-test.sh $(CHART)

# --- control plane ---
# The control plane, kwok, kubectl and helm are built from the Go module proxy in one module
# of their own (e2e/tools), so that kubernetes' dependency tree stays out of go.mod, and so
# that they share one version of every k8s.io library: the build cache compiles each package
# once, not once per tool. e2e/tools is not in go.work (its versions would leak into the
# daemon's build), hence GOWORK=off. Its golang.org/x modules are held at the daemon's
# versions, and everything is built static (CGO_ENABLED=0, as Kubernetes' own release builds
# are) with -trimpath, as the daemon is: the daemon's build and the demo's commands then find
# client-go and the rest in the build cache. The binaries are stripped, as Helm's release is:
# linking is a good part of a cold build.
TOOLS       := cd e2e/tools && GOWORK=off CGO_ENABLED=0
TOOLS_DEPS  := e2e/tools/go.mod e2e/tools/go.sum
KUBE_CMDS   := kube-apiserver kube-controller-manager kube-scheduler kubectl
HELM_VER    = $(shell awk '$$1 == "helm.sh/helm/v3" {print $$2}' e2e/tools/go.mod)
KWOK_STAGES := node/fast/node-initialize.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml
.PHONY: control-plane
control-plane: $(CONTROL_PLANE) ## Build the local control plane's binaries into bin/ (cached).
# One go build for the control plane, kwok and kubectl: the compiles of all of them share
# both cores, and the links run beside the compiles.
$(addprefix $(BIN)/,etcd $(KUBE_CMDS) kwok) &: $(TOOLS_DEPS) e2e/tools/etcd/main.go
	@mkdir -p $(BIN)
	$(TOOLS) go build -trimpath -ldflags '-s -w $(KUBE_LDFLAGS)' -o $(BIN)/ ./etcd $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_CMDS)) sigs.k8s.io/kwok/cmd/kwok
$(BIN)/kwok-stages/.done: $(TOOLS_DEPS)
	mkdir -p $(@D) && d=$$($(TOOLS) go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage && install -m 0644 $(addprefix $$d/,$(KWOK_STAGES)) $(@D)/
	@touch $@

# --- tests ---
# check is everything that needs no control plane and no cross-compile: what to run before a
# push. make runs each target once, so test runs check's targets once too.
.PHONY: check test lint shellcheck vet test-unit test-e2e fuzz soak run demo demo-down
check: vet lint test-unit chart-test alerts-test check-manifests ## Run the checks that need no control plane: vet, lint, unit tests, chart, alert rules, manifests.
test: check release-test test-e2e ## Run every test: check, the release path, e2e on a local control plane, and the UI extension (ui-test).
# golangci-lint is built from the Go module proxy, pinned; .golangci.yml says what it checks.
# It lints each module on its own (GOWORK=off): the daemon's as the daemon is built, then
# bench and e2e (with the e2e tests' tag). shellcheck is Debian's: the Go module proxy does
# not serve it, and npm's shellcheck package downloads it from GitHub.
GOLANGCI_LINT_VER := v2.15.0
GOLANGCI := GOWORK=off $(BIN)/golangci-lint run
$(BIN)/golangci-lint:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VER)
lint: $(BIN)/golangci-lint shellcheck ## Run golangci-lint on the daemon, bench and e2e (.golangci.yml; the binary is cached in bin/, delete it to rebuild), and shellcheck.
	$(GOLANGCI) ./... && cd bench && $(GOLANGCI) ./...
	cd e2e && $(GOLANGCI) --build-tags e2e,rancher ./...
shellcheck: ## Check the shell scripts (hack/, e2e/demo.sh, .ci/run) with shellcheck, installed with apt-get when missing.
	@hack/apt-install.sh shellcheck shellcheck
	shellcheck $(wildcard hack/*.sh e2e/*.sh) .ci/run
# In the workspace (go.work) ./... is the product's module alone: bench and e2e are modules
# of their own, so every go vet and go test names them.
vet: ## Check formatting and run go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); [ -z "$$out" ] || { echo "gofmt would change:"; echo "$$out"; exit 1; }
	go vet ./... ./bench/... && go vet -tags e2e,rancher ./e2e/...
test-unit: $(BIN)/helm ## Run the unit tests (pure logic, fuzz seed corpora included; docs/security.md's rights against the chart, with Helm).
	go test -race -count=1 ./... ./bench/... ./e2e/...
test-e2e: $(CONTROL_PLANE) $(BIN)/kubectl $(BIN)/promtool build ## Run the e2e tests against a real kube-apiserver, etcd, controller-manager, scheduler and kwok.
	SHARDKEEPER_BINARY=$(BIN)/shardkeeper go test -tags e2e -p 1 -count=1 -timeout $(E2E_TIMEOUT) ./e2e/...
# TestUpgradeFromV010 upgrades from v0.1.0 (commit $(V010_COMMIT), which a full clone has):
# its daemon and chart, built once from its tree into bin/.
V010_COMMIT := 8682fbc
$(BIN)/v0.1.0/shardkeeper:
	hack/old-release.sh v0.1.0 $(V010_COMMIT) $(@D)
test-e2e: $(BIN)/v0.1.0/shardkeeper
fuzz: ## Fuzz every Fuzz function of the daemon's packages (the ConfigMap parsers, the renderer, placement, failover...), $(FUZZ_TIME) each; crashes land in testdata/fuzz as seed cases.
	hack/fuzz.sh $(FUZZ_TIME)
soak: $(CONTROL_PLANE) build $(BIN)/helm ## Run the crash storm with $(SOAK_RUNS) random seeds and the control-plane faults again and again.
	hack/soak.sh $(BIN)/shardkeeper $(SOAK_RUNS)
run: build ## Run shardkeeper against the current kubeconfig (ARGS="--preset fleet,flux ...").
	$(BIN)/shardkeeper $(ARGS)
demo: $(CONTROL_PLANE) $(BIN)/kubectl $(BIN)/helm build ## Start a local control plane with shardkeeper running on it, and print how to drive it.
	@./e2e/demo.sh up "$(DEMO_DIR)"
demo-down: ## Stop everything `make demo` started.
	@./e2e/demo.sh down "$(DEMO_DIR)"

# --- chart ---
# Helm is built from e2e/tools, pinned there, with the ldflags of Helm's own release build:
# without them `helm template` and `helm lint` take the cluster for Kubernetes v1.20 and
# refuse the chart's kubeVersion. Its k8s.io modules are those of e2e/tools, the control plane's.
HELM_K8S_MINOR := $(word 2,$(subst ., ,$(KUBE_VER)))
HELM_LDFLAGS   := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VER) \
  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR) \
  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR)
CHART          := charts/shardkeeper
CHART_NS       := cattle-fleet-system
# Helm's caches and settings stay under bin/, away from the user's own.
HELM           := HELM_CACHE_HOME=$(BIN)/.helm/cache HELM_CONFIG_HOME=$(BIN)/.helm/config HELM_DATA_HOME=$(BIN)/.helm/data $(BIN)/helm
VAP_API        := admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy
MAP_API        := admissionregistration.k8s.io/v1/MutatingAdmissionPolicy
# What the chart's scripts (hack/chart-test.sh, hack/manifests.sh) are told.
CHART_ENV      := HELM='$(HELM)' CHART=$(CHART) CHART_NS=$(CHART_NS) VAP_API=$(VAP_API) MAP_API=$(MAP_API)
# promtool is built from the Go module proxy like the other tools; Prometheus tags its Go
# module v0.3XX.Y for its release 3.XX.Y.
PROMETHEUS_VER := v0.316.0
ALERTS         := $(CHART)/files/alerts.yaml
.PHONY: helm chart-test alerts-test manifests check-manifests
helm: $(BIN)/helm ## Build bin/helm, the pinned Helm (cached; delete it to rebuild).
$(BIN)/helm: $(TOOLS_DEPS)
	@mkdir -p $(BIN)
	$(TOOLS) go build -trimpath -ldflags '$(HELM_LDFLAGS)' -o $(BIN)/helm helm.sh/helm/v3/cmd/helm
chart-test: $(BIN)/helm ## Lint and render the Helm chart with every values set in charts/shardkeeper/ci/ and with 0.1.0's values (--reuse-values); check that bad values are refused and docs/security.md's RBAC table.
	@$(CHART_ENV) hack/chart-test.sh
$(BIN)/promtool:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install -trimpath github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VER)
alerts-test: $(BIN)/promtool ## Check the chart's alert rules and run their unit tests (promtool test rules).
	$(BIN)/promtool check rules $(ALERTS)
	$(BIN)/promtool test rules e2e/testdata/alerts-test.yaml
manifests: $(BIN)/helm ## Regenerate manifests/ from the Helm chart's default values.
	@$(CHART_ENV) hack/manifests.sh manifests
	@echo "manifests/ regenerated from $(CHART)"
check-manifests: $(BIN)/helm ## Fail if manifests/ differs from a fresh render of the Helm chart.
	@$(CHART_ENV) hack/manifests.sh --check
test-e2e: $(BIN)/helm

# --- bench ---
.PHONY: bench bench-million bench-pool clean
bench: $(CONTROL_PLANE) build $(BIN)/helm ## Measure convergence, placement, memory, decision latency, idle API traffic and start-up, each beside a reference; writes bench/results.json and bench/results.md from it (BENCH_ARGS="--objects=10000 --idle=60s" for a shorter run).
	go run ./bench --bin-dir $(BIN) --out bench/results.md $(BENCH_ARGS)
bench-million: $(CONTROL_PLANE) build ## The million-object mode of the benchmark (about 45 minutes, not part of `bench`): memory, start-up beside a bare LIST, decision latency and idle API traffic at 1,000,000 mapped objects; writes bench/results-million.md and .json.
	go run ./bench --bin-dir $(BIN) --out bench/results-million.md --million --skip-convergence --skip-placement $(BENCH_ARGS)
bench-pool: ## Render bench/results.md from two or more full runs' results.json, their convergence runs pooled (BENCH_POOL="bench/results-1.json,bench/results.json"; the page is the last one's); measures nothing.
	go run ./bench --pool "$(BENCH_POOL)" --out bench/results.md
clean: ## Remove build output (the cached control plane too).
	rm -rf $(BIN) $(DEMO_DIR)

# --- flux controllers ---
# Flux's own source-, kustomize- and helm-controller, at the versions Flux v2.9.5 ships, built
# from the Go module proxy as the control plane is (static, -trimpath, stripped), each rebuilt
# when its go.mod or go.sum changes. Each has a module of its own under e2e/fluxtools, out of
# go.work (GOWORK=off), so that each is built with the versions its own go.mod selects: they
# disagree on go-digest, for one.
FLUX_CONTROLLERS := source-controller kustomize-controller helm-controller
.PHONY: flux-controllers
flux-controllers: $(addprefix $(BIN)/,$(FLUX_CONTROLLERS)) ## Build Flux v2.9.5's source-, kustomize- and helm-controller into bin/ (cached).
$(addprefix $(BIN)/,$(FLUX_CONTROLLERS)): $(BIN)/%: e2e/fluxtools/%/go.mod e2e/fluxtools/%/go.sum
	@mkdir -p $(BIN)
	cd e2e/fluxtools/$* && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $@ github.com/fluxcd/$*
# TestRealFluxControllers runs them as the shards that shardkeeper makes.
test-e2e: $(addprefix $(BIN)/,$(FLUX_CONTROLLERS))

# --- ui ---
# The Rancher UI extension (ui/, docs/ui.md). Shell 3.0.10 and later need Node 24: it and
# yarn 1 come from the npm registry into bin/ (hack/node.sh); Chromium and busybox from
# Debian's packages. The daemon's build never needs any of it.
NODE_VER   := 24.22.3
YARN_VER   := 1.22.22
NODE_DIR   := $(BIN)/node-$(NODE_VER)
UI_ENV     := PATH=$(NODE_DIR)/node/bin:$(NODE_DIR)/yarn/bin:$$PATH CYPRESS_INSTALL_BINARY=0 SHARDKEEPER_BIN_DIR=$(BIN)
UI_PKG     := shardkeeper-extension
UI_VERSION = $(shell sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' ui/pkg/$(UI_PKG)/package.json)
UI_STAGE   := $(DIST)/extension-chart/$(UI_PKG)
# logged-to sends a command's output to the file $(1), shown only if it fails.
logged-to  = >$(1) 2>&1 || { cat $(1); exit 1; }
bundle-size = echo "bundle: $$(cat $(DIST)/extension/plugin/*.js | wc -c) bytes of JavaScript, $$(cat $(DIST)/extension/plugin/*.js | gzip -9 | wc -c) gzipped"
$(NODE_DIR)/.done:
	hack/node.sh $(NODE_DIR) $(NODE_VER) $(YARN_VER)
	@touch $@
ui/node_modules/.done: ui/package.json ui/yarn.lock $(NODE_DIR)/.done
	cd ui && $(UI_ENV) yarn install --frozen-lockfile --non-interactive $(call logged-to,$(CURDIR)/ui/yarn-install.log)
	@touch $@
.PHONY: ui-build ui-chart ui-test ui-package
ui-build: ui/node_modules/.done ## Build the UI extension with yarn build-pkg (Shell's type check) into dist/extension, laid out as Rancher fetches it.
	cd ui && $(UI_ENV) yarn --silent build-pkg $(UI_PKG) $(call logged-to,$(CURDIR)/ui/dist-pkg.log)
	cd ui && $(UI_ENV) node scripts/layout.js dist-pkg/$(UI_PKG)-$(UI_VERSION) $(DIST)/extension && $(bundle-size)
ui-chart: ui-build ## Stage the extension chart with the built files in dist/extension-chart.
	@rm -rf $(UI_STAGE) && mkdir -p $(dir $(UI_STAGE))
	cp -r charts/$(UI_PKG) $(UI_STAGE) && cp -r $(DIST)/extension $(UI_STAGE)/files
ui-test: ui-chart $(BIN)/helm ## Test the UI extension: jest (parsing, page, dialogs; Rancher's fetch and loader on the chart's files), the chart, and the page in headless Chromium.
	$(HELM) lint --strict $(UI_STAGE)
	@$(UI_ENV) hack/ui-test.sh $(UI_STAGE) $(DIST)
ui-package: ui-chart $(BIN)/helm ## Package the extension chart into dist/chart beside the daemon's (after chart-package) and index both.
	@mkdir -p $(DIST)/chart
	$(HELM) package $(UI_STAGE) --destination $(DIST)/chart && $(helm-index)
test: ui-test

# --- rancher ---
# The Rancher tier (e2e/rancher, docs/ui.md): the user's story in a real Rancher v2.15.0 built
# from the archives in RANCHER_SOURCES, which the Go module proxy does not serve (named by
# hack/rancher-build.sh). Its helm operations run with Helm v4, whose flags Rancher passes.
HELM4_VER := v4.3.2
.PHONY: test-rancher
$(BIN)/helm-v4/helm:
	GOBIN=$(@D) CGO_ENABLED=0 go install -trimpath -ldflags '-s -w' helm.sh/helm/v4/cmd/helm@$(HELM4_VER)
test-rancher: $(CONTROL_PLANE) build $(BIN)/helm $(BIN)/helm-v4/helm ui-chart ## Run the user's story in a real Rancher with headless Chromium (RANCHER_SOURCES: the folder of Rancher's archives).
	@chromium=$$(hack/chromium.sh) && hack/rancher-test.sh $(BIN) $(NODE_DIR)/node/bin:$(NODE_DIR)/yarn/bin "$$chromium"
