# shardkeeper: `make help` lists the targets.

SHELL := /bin/bash
.DEFAULT_GOAL := help

VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN        := $(CURDIR)/bin
KUBE_VER   := v1.37.2
KWOK_VER   := v0.8.0
GO_LDFLAGS := -s -w -X github.com/shardkeeper/shardkeeper/pkg/version.Version=$(VERSION)
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VER)
CONTROL_PLANE := $(BIN)/etcd $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kwok $(BIN)/kwok-stages/.done
DEMO_DIR   := $(CURDIR)/.demo
E2E_TIMEOUT ?= 30m
FUZZ_TIME  ?= 1m

export SHARDKEEPER_BIN_DIR := $(BIN)

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/shardkeeper.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(GO_LDFLAGS)' -o $(BIN)/shardkeeper .

IMAGE ?= ghcr.io/shardkeeper/shardkeeper:$(VERSION)
CONTAINER_ENGINE ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)

.PHONY: image
image: ## Build the container image $(IMAGE) (needs docker or podman).
	@if [ -z "$(CONTAINER_ENGINE)" ]; then echo "no container engine (docker or podman) found"; exit 1; fi
	$(CONTAINER_ENGINE) build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

.PHONY: control-plane
control-plane: $(CONTROL_PLANE) ## Build the local control plane's binaries into bin/ (cached).

# The control plane is built from the Go module proxy in its own module
# (e2e/tools), so that kubernetes' dependency tree stays out of go.mod.
$(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler: e2e/tools/go.mod e2e/tools/go.sum
	@mkdir -p $(BIN)
	cd e2e/tools && go build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $(BIN)/ k8s.io/kubernetes/cmd/$(notdir $@)

$(BIN)/kubectl: e2e/tools/go.mod e2e/tools/go.sum
	@mkdir -p $(BIN)
	cd e2e/tools && go build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $(BIN)/kubectl k8s.io/kubernetes/cmd/kubectl

$(BIN)/etcd: e2e/tools/go.mod e2e/tools/go.sum e2e/tools/etcd/main.go
	@mkdir -p $(BIN)
	cd e2e/tools && go build -trimpath -o $(BIN)/etcd ./etcd

$(BIN)/kwok:
	GOBIN=$(BIN) go install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VER)

$(BIN)/kwok-stages/.done:
	@mkdir -p $(BIN)/kwok-stages
	go mod download sigs.k8s.io/kwok@$(KWOK_VER)
	d=$$(go env GOMODCACHE)/sigs.k8s.io/kwok@$(KWOK_VER)/kustomize/stage; \
	  install -m 0644 $$d/node/fast/node-initialize.yaml $$d/pod/fast/pod-ready.yaml \
	    $$d/pod/fast/pod-complete.yaml $$d/pod/fast/pod-delete.yaml $(BIN)/kwok-stages/
	@touch $@

.PHONY: test
test: vet test-unit test-e2e ## Run every test: vet, unit and e2e on a local control plane.

.PHONY: vet
vet: ## Check formatting and run go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...
	go vet -tags e2e ./e2e/...

.PHONY: test-unit
test-unit: ## Run the unit tests (pure logic, fuzz seed corpora included).
	go test -race -count=1 ./...

.PHONY: test-e2e
test-e2e: $(CONTROL_PLANE) build ## Run the e2e tests against a real kube-apiserver, etcd, controller-manager, scheduler and kwok.
	SHARDKEEPER_BINARY=$(BIN)/shardkeeper go test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) ./e2e/...

.PHONY: fuzz
fuzz: ## Fuzz the ConfigMap parser for $(FUZZ_TIME).
	go test ./pkg/shardconfig -run '^$$' -fuzz FuzzParseShards -fuzztime $(FUZZ_TIME)

.PHONY: run
run: build ## Run shardkeeper against the current kubeconfig (ARGS="--preset fleet,flux ...").
	$(BIN)/shardkeeper $(ARGS)

.PHONY: demo
demo: $(CONTROL_PLANE) $(BIN)/kubectl build ## Start a local control plane with shardkeeper running on it, and print how to drive it.
	@./e2e/demo.sh up "$(DEMO_DIR)"

.PHONY: demo-down
demo-down: ## Stop everything `make demo` started.
	@./e2e/demo.sh down "$(DEMO_DIR)"

.PHONY: clean
clean: ## Remove build output (the cached control plane too).
	rm -rf $(BIN) $(DEMO_DIR)
