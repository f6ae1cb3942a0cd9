# finegrain — build, test and run everything from here. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
PKGS := ./...

.PHONY: help build test unit lint bench fuzz clean

help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build every command into bin/, stamped with hack/version.sh's version (VERSION=... sets it)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$$(hack/version.sh --ldflags)" -o $(BIN)/ ./cmd/...

test: lint unit ## lint, then every unit test (root-only and kernel tests skip with a reason elsewhere)

# The Helm chart's test is a module of its own (charts/finegrain/test/go.mod), so that Helm's and
# kustomize's dependencies stay out of finegrain's; it renders and lints the chart.
CHART_TEST := charts/finegrain/test

unit:
	$(GO) test -count=1 $(PKGS)
	cd $(CHART_TEST) && $(GO) test -count=1 ./...

lint: ## gofmt and go vet must be clean
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	cd $(CHART_TEST) && $(GO) vet ./...

bench: ## Go benchmarks (allocation counts included)
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

FUZZTIME ?= 20s
fuzz: ## run every fuzz target for FUZZTIME each
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

.PHONY: packing
packing: ## compare finegrain's core packing with the kubelet's rule on seeded request streams
	$(GO) run ./bench/packing

.PHONY: simulate-workloads
SIMULATE_FLAGS ?=
simulate-workloads: ## replay generated MPI workloads through the real placer on 4 and 16 simulated E5-2697 v4 nodes vs default Kubernetes
	$(GO) run ./bench/simulator -nodes 4,16 -jobs-per-node 25 -seed 1 $(SIMULATE_FLAGS)

.PHONY: experiment-elastic
ELASTIC_RUN := $(GO) run ./bench/simulator -experiment elastic -submission-gap 90s -rescale-gap 60s
EXPERIMENT_ELASTIC := $(ELASTIC_RUN) -seed 4
# The paper's authors' set-up: 60 slots, 16 jobs, priorities by type, rescale gap 300 s, 100 job sets.
ELASTIC_AUTHORS := $(GO) run ./bench/simulator -experiment elastic -submission-gap 90s -rescale-gap 300s -nodes 4 -slots-per-node 15 -jobs 16 -priority-by-type -seed 1 -seeds 100
experiment-elastic: ## the elastic scheduler's experiment (docs/experiments.md): table, sweeps, seeds 1-10 and 1-100, the authors' set-up, JSON and PNG charts in _output/experiments/elastic
	@mkdir -p _output/experiments/elastic
	$(EXPERIMENT_ELASTIC) -plot _output/experiments/elastic | tee _output/experiments/elastic/elastic.md
	$(EXPERIMENT_ELASTIC) -o json > _output/experiments/elastic/elastic.json
	$(ELASTIC_RUN) -seed 1 -seeds 10 | tee _output/experiments/elastic/elastic-seeds.md
	$(EXPERIMENT_ELASTIC) -shrink-equal-priority=false > _output/experiments/elastic/elastic-lower-only.md
	$(ELASTIC_RUN) -seed 1 -seeds 10 -shrink-equal-priority=false > _output/experiments/elastic/elastic-seeds-lower-only.md
	$(ELASTIC_AUTHORS) | tee _output/experiments/elastic/elastic-authors.md
	$(ELASTIC_RUN) -seed 1 -seeds 100 > _output/experiments/elastic/elastic-seeds-100.md

.PHONY: experiment-finegrained-1 experiment-finegrained-2
experiment-finegrained-1: ## the fine-grained scheduling paper's experiment 1 (docs/experiments.md): table and JSON in _output/experiments/finegrained-1
	@mkdir -p _output/experiments/finegrained-1
	$(GO) run ./bench/simulator -experiment finegrained-1 | tee _output/experiments/finegrained-1/finegrained-1.md
	$(GO) run ./bench/simulator -experiment finegrained-1 -o json > _output/experiments/finegrained-1/finegrained-1.json

experiment-finegrained-2: ## the fine-grained scheduling paper's experiment 2, seeds 0 and 3 (docs/experiments.md): tables and JSON in _output/experiments/finegrained-2
	@mkdir -p _output/experiments/finegrained-2
	for s in 0 3; do \
		$(GO) run ./bench/simulator -experiment finegrained-2 -seed $$s | tee _output/experiments/finegrained-2/finegrained-2-seed$$s.md && \
		$(GO) run ./bench/simulator -experiment finegrained-2 -seed $$s -o json > _output/experiments/finegrained-2/finegrained-2-seed$$s.json || exit 1; \
	done

.PHONY: experiment-genisys
experiment-genisys: ## the Genisys thesis's experiment, seed 2, pilot/small/large workloads (docs/experiments.md): tables, JSON and PNG charts in _output/experiments/genisys
	@mkdir -p _output/experiments/genisys
	for w in pilot small large; do \
		$(GO) run ./bench/simulator -experiment genisys -seed 2 -workload $$w -plot _output/experiments/genisys | tee _output/experiments/genisys/genisys-$$w.md && \
		$(GO) run ./bench/simulator -experiment genisys -seed 2 -workload $$w -o json > _output/experiments/genisys/genisys-$$w.json || exit 1; \
	done

.PHONY: hpcc-tool hpcc-examples
hpcc-tool: ## bin/hpcc: HPCC's headline figures of an hpccoutf.txt or launcher log, hpccinf.txt sizing (bench/hpcc)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/hpcc ./bench/hpcc

hpcc-examples: ## regenerate the hpccinf.txt ConfigMap of each examples/hpcc-*.yaml and of the demo's job from its HPCJob's tasks and memory
	$(GO) run ./bench/hpcc inf -update examples/hpcc-*.yaml hack/cluster/demo/hpcjob.yaml

.PHONY: topology-crosscheck
topology-crosscheck: ## compare Discover(/sys) with lscpu, hwloc's lstopo and ghw on this machine (installs hwloc)
	@. hack/deps.sh && install_deps test hwloc
	$(GO) test -count=1 -v -run 'Live|Ghw' ./pkg/topology

.PHONY: fgworker fgworker-openblas test-openblas bench-pinning bench-pinning-cluster
fgworker: ## static fgworker (gonum BLAS, CGO_ENABLED=0): the workload image's binary
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/fgworker ./bench/worker

fgworker-openblas: ## fgworker with DGEMM through OpenBLAS (cgo; installs libopenblas-dev)
	@. hack/deps.sh && install_deps bench
	@mkdir -p $(BIN)
	CGO_ENABLED=1 $(GO) build -tags openblas -trimpath -o $(BIN)/fgworker-openblas ./bench/worker

test-openblas: ## the bench tests with the OpenBLAS backend
	@. hack/deps.sh && install_deps bench
	CGO_ENABLED=1 $(GO) test -count=1 -tags openblas ./bench/internal/... ./bench/worker

PINNING_FLAGS ?=
bench-pinning: fgworker-openblas ## pinning scenarios on this machine's cgroups (root): table, JSON, plots in _output/pinning
	@[ "$$(id -u)" -eq 0 ] || { echo "bench-pinning creates cgroups: run it as root"; exit 1; }
	$(GO) build -o $(BIN)/pinning ./bench/pinning
	$(BIN)/pinning -worker $(BIN)/fgworker-openblas -out _output/pinning $(PINNING_FLAGS)

PINNING_CLUSTER_FLAGS ?=
bench-pinning-cluster: ## the same scenarios as pods on the local cluster (root, cluster lock; kubelet-static needs no cluster up beforehand): _output/pinning-cluster
	@[ "$$(id -u)" -eq 0 ] || { echo "bench-pinning-cluster drives the local cluster: run it as root"; exit 1; }
	@. hack/deps.sh && install_deps cluster
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/pinning ./bench/pinning
	PINNING_CLUSTER_FLAGS="$(PINNING_CLUSTER_FLAGS)" bench/pinning/cluster.sh

.PHONY: test-vm
VMTEST_FLAGS ?=
test-vm: ## boot the qemu matrix (cgroup v1/v2, 2 sockets, NUMA, SMT) and run the kernel tests in each guest
	@. hack/deps.sh && install_deps vm
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/vmtest ./test/vm/cmd/vmtest
	$(BIN)/vmtest -fetch-kernel
	FINEGRAIN_VM_BOOT_TESTS=1 $(GO) test -count=1 -run '^TestBoot' ./test/vm
	$(BIN)/vmtest $(VMTEST_FLAGS)

.PHONY: cluster-up cluster-down images e2e nri-proof demo demo-slurm
cluster-up: ## local Kubernetes: one node on 127.0.0.1, or NODES=3 nodes in namespaces of their own (KUBELET_CPU_POLICY=static: the kubelet pins; CONTAINERD=2: containerd 2 with NRI)
	@. hack/deps.sh && install_deps cluster
	hack/cluster/up.sh

cluster-down: ## stop the local cluster and remove its processes, mounts, cgroups and state
	hack/cluster/down.sh

images: ## build the pause, finegrain, worker and MPI images (the MPI one is cached); import them into a running local cluster
	@. hack/deps.sh && install_deps images
	hack/images/build.sh --import

e2e: ## end-to-end suite on the local cluster: policies none and static on containerd 1.6, the pinning suite on containerd 2 with NRI, the multi-node suite on 3 nodes (KEEP_CLUSTER=1, E2E_RUN=..., E2E_NRI=0, E2E_NODES=0)
	@. hack/deps.sh && install_deps cluster
	hack/cluster/e2e.sh

nri-proof: ## on a CONTAINERD=2 local cluster with the agent deployed: first affinity = pin over PODS workers (100), nri vs inotify path
	$(GO) build -o $(BIN)/nriproof ./bench/nriproof
	$(BIN)/nriproof -pods $(or $(PODS),100) -json $(CURDIR)/_output/nriproof.json

demo: build hpcc-tool ## the main job: build, bring the local cluster up, deploy daemonset/, run an HPC job and a pinned pod, show placement and pins
	@. hack/deps.sh && install_deps cluster
	hack/cluster/demo.sh

demo-slurm: build ## Slurm virtual cluster on the local cluster: an unchanged sbatch MPI script held until the placer places it, its ranks on the placeholder's pinned CPU, a second job pending with finegrain's reason, scancel handing the CPU over (under a minute)
	@. hack/deps.sh && install_deps cluster
	hack/cluster/demo-slurm.sh

.PHONY: bench-placer-scale
PLACERSCALE_FLAGS ?=
bench-placer-scale: ## on the running local cluster: kwok nodes, pods bound/s by the placer vs kube-scheduler, gangs' time to placement (PLACERSCALE_FLAGS=...)
	bench/placerscale/run.sh $(PLACERSCALE_FLAGS)

.PHONY: bench-dc-objective
bench-dc-objective: ## latency target vs autoscalers on a 2-node local cluster it brings up (root, cluster lock, ~15 min): none, HPA, ServiceObjective; _output/dc-objective (DC_OBJECTIVE_FLAGS=...)
	@[ "$$(id -u)" -eq 0 ] || { echo "bench-dc-objective drives the local cluster: run it as root"; exit 1; }
	@. hack/deps.sh && install_deps cluster
	$(GO) build -o $(BIN)/dcobjective ./bench/dcobjective
	DC_OBJECTIVE_FLAGS="$(DC_OBJECTIVE_FLAGS)" bench/dcobjective/run.sh

clean: ## remove build outputs
	rm -rf $(BIN)
