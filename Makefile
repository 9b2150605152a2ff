# hpcgnn: the two entry points are `make run` (the main job) and `make test` (the suite).
# Both create or reuse the virtual environment $(VENV) and install everything into it.
#
#   make run                 4-rank training run on the generated default graph
#   make run NP=8 ALGO=1d    other rank counts / algorithms
#   make test                the whole test suite, serially and at 1, 2, 3 and 4 ranks
#   make typecheck           mypy on hpcgnn (CI runs it before make test)
#   make ptx                 compile every cuda/*.cu to PTX (sm_80, sm_90; sm_70 where nvcc has it)
#   make nvrtc               compile every cuda/*.cu through CuPy's NVRTC path, CUDA 12 and 13
#                            (no GPU or driver needed; builds build/nvrtc12, build/nvrtc13)
#   make gpu-wheels PY=3.12  the wheels a GPU node without a package index may lack
#   make wheel-check         the built wheel, installed outside the checkout, runs model,
#                            jobs render, a 2-rank train, and prepares (pyg, npz) and trains
#                            one's own graph at 2 ranks
#   make gpu-check           prove the GPU path on one GPU node (jobs/gpu_check.py; a table in
#                            perf/results/gpu-<date>.md); HPCGNN_EMULATE_CUDA=1 on the emulated GPU
#   make test-emulated       the model, exchange, spmm and wire tests on the emulated GPU
#
# Cluster MPI instead of the bundled MPICH wheel:  make setup MPI=system  (builds mpi4py
# against the `mpicc` on PATH, or MPICC="cc -target-accel=nvidia80 -shared" on Cray GPU
# nodes: the GPU transport layer linked, see docs/jobs.md) and  make run MPIEXEC="srun" .

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
MPI     ?= wheel
# The torch of the set-up (the CPU build on these machines' disk; pyproject.toml takes a range)
TORCH   ?= 2.13.0
MPIEXEC ?= $(VENV)/bin/mpiexec
NP      ?= 4
ALGO    ?= 1d
EPOCHS  ?= 50
GRAPH   ?= inputs/sbm-20k.h5
RUNDIR  ?= runs/default
TEST_RANKS ?= 1 2 3 4
PYTEST_ARGS ?= -q

ifeq ($(MPI),system)
EXTRAS := test-system-mpi
else
EXTRAS := test
endif

.PHONY: setup run test lint typecheck ptx clean-venv

$(VENV)/.installed-$(MPI): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q 'torch==$(TORCH)'
ifeq ($(MPI),system)
	$(if $(MPICC),MPICC="$(MPICC)") $(PY) -m pip install -q --no-binary=mpi4py --no-cache-dir mpi4py
endif
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	rm -f $(VENV)/.installed-*
	touch $@

setup: $(VENV)/.installed-$(MPI)

$(GRAPH): | setup
	$(VENV)/bin/hpcgnn prepare synthetic --generator sbm --num-nodes 20000 --avg-degree 16 \
		--feature-dim 64 --classes 8 --seed 0 --out $(GRAPH)

run: setup $(GRAPH)
	mkdir -p $(RUNDIR)
	$(MPIEXEC) -n $(NP) $(VENV)/bin/hpcgnn train $(GRAPH) --algo $(ALGO) --epochs $(EPOCHS) \
		--layers 2 --hidden 64 --threads 1 --metrics $(RUNDIR)/metrics.json

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)
	set -e; for n in $(TEST_RANKS); do \
		echo "== MPI tests at $$n rank(s)"; \
		$(MPIEXEC) -n $$n $(PY) -m mpi4py -m pytest --only-mpi $(PYTEST_ARGS); \
	done
	@echo "== grids, 3D on the 2x2x2 cube, GIST under a memory limit, a 4-rank checkpoint at 8 ranks, the paper's volumes"
	$(MPIEXEC) -n 8 $(PY) -m mpi4py -m pytest --only-mpi $(PYTEST_ARGS) \
		tests/grid/test_process_grid.py tests/models/test_summa.py::test_cube_2x2x2_at_8_ranks \
		tests/test_params_table.py tests/training/test_gist_memory.py \
		tests/training/test_checkpoint.py::test_a_checkpoint_resumes_at_another_rank_count_and_layout \
		tests/training/test_product_order.py::test_equal_widths_move_the_papers_spmm_volumes

# Compile check of the CUDA sources (CuPy compiles them again at run time with NVRTC).
# -DHPCGNN_INSTANTIATE emits the template instantiations CuPy requests by name. One PTX
# file per source and arch, rebuilt when the source or a header changes (make -j works).
NVCC     ?= nvcc
PTX_DIR  ?= build/ptx
CUDA_SRC := $(wildcard cuda/*.cu)
PTX_ARCH := 80 90 $(shell $(NVCC) --list-gpu-arch 2>/dev/null | grep -qx compute_70 && echo 70)
PTX_OUT  := $(foreach a,$(PTX_ARCH),$(patsubst cuda/%.cu,$(PTX_DIR)/%.sm_$(a).ptx,$(CUDA_SRC)))

define PTX_RULE
$(PTX_DIR)/%.sm_$(1).ptx: cuda/%.cu $(wildcard cuda/*.cuh)
	@mkdir -p $(PTX_DIR)
	$(NVCC) --ptx -std=c++17 -DHPCGNN_INSTANTIATE -Icuda -arch=sm_$(1) -o $$@ $$<
endef
$(foreach a,$(PTX_ARCH),$(eval $(call PTX_RULE,$(a))))

ptx: $(PTX_OUT)
	@echo "ptx: $(words $(CUDA_SRC)) sources, arches $(strip $(PTX_ARCH)) -> $(PTX_DIR)"

# NVRTC check (no GPU, no driver, no nvcc): every cuda/*.cu compiled the way the loader's
# cupy.RawModule compiles it (CuPy's own path, with COMPILE_OPTIONS and NAME_EXPRESSIONS of
# hpcgnn/kernels/cuda_modules.py), for CUDA 12 and CUDA 13, and every kernel the loader
# asks for found in the cubin: see hpcgnn/kernels/nvrtc_check.py. Each CUDA major has a venv
# $(NVRTC_ENV)<major> holding only NumPy, CuPy and the NVRTC and CUDA-runtime wheels (the
# runtime wheel for the headers CuPy's path puts on the include path; no torch): cupy-cuda12x
# and cupy-cuda13x cannot share one. A venv is made when missing or when its package list
# changed (about 620 MB and 520 MB), else reused; pip caches nothing outside it.
#   make nvrtc-13                         one CUDA major
#   make nvrtc NVRTC_ARCH=sm_80,sm_100    other archs (CuPy's arch strings, sm_NN)
NVRTC_ARCH   ?= sm_80,sm_90
NVRTC_MAJORS ?= 12 13
NVRTC_ENV    ?= build/nvrtc
NVRTC12_PKGS ?= cupy-cuda12x==14.2.0 nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79
NVRTC13_PKGS ?= cupy-cuda13x==14.2.0 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96

.PHONY: nvrtc
nvrtc: $(addprefix nvrtc-,$(NVRTC_MAJORS))

# (a pattern rule: not .PHONY, which would skip it; no file nvrtc-12 exists, so it always runs)
nvrtc-%:
	@set -e; env="$(NVRTC_ENV)$*"; pkgs="$(NVRTC$*_PKGS)"; \
	test -n "$$pkgs" || { echo "nvrtc: no NVRTC$*_PKGS for CUDA $*"; exit 1; }; \
	if [ "$$(cat "$$env/.packages" 2>/dev/null)" != "$$pkgs" ]; then \
		echo "== nvrtc: making $$env: $$pkgs"; \
		rm -rf "$$env"; $(PYTHON) -m venv "$$env"; \
		"$$env/bin/python" -m pip install -q --no-cache-dir --disable-pip-version-check $$pkgs; \
		echo "$$pkgs" > "$$env/.packages"; \
	fi
	$(NVRTC_ENV)$*/bin/python -m hpcgnn.kernels.nvrtc_check --arch $(NVRTC_ARCH)

# Wheels a GPU node without a package index may lack, for the node's Python (PY=3.x, default
# 3.12; PY is otherwise the venv's interpreter, so run this target on its own): the MPICH wheel
# (libmpi, mpiexec), mpi4py (PyPI's wheels load an MPICH- or Open MPI-ABI libmpi at run time:
# the MPICH wheel's when it sits in the same environment), pymetis and its typing-extensions,
# pytest-mpi, and hpcgnn itself (built from this tree), in $(GPU_WHEELS_DIR), remade each time,
# at most $(GPU_WHEELS_MAX_MIB) MiB. On the node `make gpu-check` runs
#   python3 jobs/install_missing_wheels.py --venv build/gpu-env build/gpu-wheels
# which makes a venv seeing the node's packages (its torch, CuPy...) and installs into it
# (pip --no-index --no-deps) only the wheels whose distribution the node lacks (MPICH and
# mpi4py only when `from mpi4py import MPI` fails there, then both) and hpcgnn always.
# (Not pip --target: pip leaves out the MPICH wheel's libmpi.)
GPU_PY             := $(if $(filter 3.%,$(PY)),$(PY),3.12)
GPU_WHEELS_DIR     ?= build/gpu-wheels
GPU_WHEELS         ?= mpich==5.0.2 mpi4py==4.1.2 pymetis==2025.2.2 typing-extensions==4.16.0 \
                      pytest-mpi==0.6
GPU_PLATFORMS      ?= manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
                      manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_5_x86_64 \
                      manylinux1_x86_64
GPU_WHEELS_MAX_MIB ?= 60

.PHONY: gpu-wheels
gpu-wheels:
	rm -rf $(GPU_WHEELS_DIR) build/lib build/bdist.*
	mkdir -p $(GPU_WHEELS_DIR)
	$(PYTHON) -m pip download -q --no-cache-dir --disable-pip-version-check --no-deps \
		--only-binary=:all: --python-version $(GPU_PY) --implementation cp \
		$(addprefix --platform ,$(GPU_PLATFORMS)) -d $(GPU_WHEELS_DIR) $(GPU_WHEELS)
	$(PYTHON) -m pip wheel -q --no-cache-dir --disable-pip-version-check --no-deps . \
		-w $(GPU_WHEELS_DIR)
	@ls -1 $(GPU_WHEELS_DIR)
	@du -sb $(GPU_WHEELS_DIR) | awk '{ mib = $$1 / 1048576; \
		printf "gpu-wheels: %s for Python $(GPU_PY): %.1f MiB\n", $$2, mib; \
		if (mib > $(GPU_WHEELS_MAX_MIB)) { \
			print "gpu-wheels: more than $(GPU_WHEELS_MAX_MIB) MiB"; exit 1 } }'

lint: setup
	$(VENV)/bin/ruff check hpcgnn tests perf examples

# The type check of the package ([tool.mypy] in pyproject.toml); CI runs it before the tests.
typecheck: setup
	$(VENV)/bin/mypy

clean-venv:
	rm -rf $(VENV)

# The GPU node check (jobs/gpu_check.py, at most 8 minutes on one GPU): probe, kernels against
# their CPU twins, pytest -m gpu, the device matrix at 1, 2 and 4 ranks, and a summary table.
# On a node it runs the node's python3 in a venv that sees the node's packages (its torch and
# CuPy), after adding from $(GPU_WHEELS_DIR) only what the node lacks. With
# HPCGNN_EMULATE_CUDA=1 (CI) it runs on the emulated GPU in $(VENV).
GPU_ENV ?= build/gpu-env
GPU_NODE_PYTHON ?= python3
GPU_CHECK_ARGS ?=

.PHONY: gpu-check test-emulated
ifeq ($(HPCGNN_EMULATE_CUDA),1)
gpu-check: setup
	$(PY) jobs/gpu_check.py $(GPU_CHECK_ARGS)
else
gpu-check:
	$(GPU_NODE_PYTHON) jobs/install_missing_wheels.py --venv $(GPU_ENV) $(GPU_WHEELS_DIR)
	PATH=$(abspath $(GPU_ENV))/bin:$$PATH $(GPU_ENV)/bin/python jobs/gpu_check.py $(GPU_CHECK_ARGS)
endif

# The tests whose bodies take the suite's device, on the emulated GPU, serially and at 1, 2
# and 4 ranks (the same bodies run on the CPU in make test and on a GPU under
# HPCGNN_TEST_DEVICE=cuda).
EMULATED_TESTS ?= tests/backend tests/models tests/exchange tests/spmm tests/comm/test_wire.py \
                  tests/training/test_device_waits.py tests/training/test_memory.py tests/kernels/test_sampling.py tests/kernels/test_csr.py \
                  tests/kernels/test_spmm.py tests/kernels/test_rows.py
test-emulated: setup
	HPCGNN_TEST_DEVICE=cuda HPCGNN_EMULATE_CUDA=1 $(PY) -m pytest $(PYTEST_ARGS) $(EMULATED_TESTS)
	set -e; for n in 1 2 4; do \
		echo "== emulated GPU: MPI tests at $$n rank(s)"; \
		HPCGNN_TEST_DEVICE=cuda HPCGNN_EMULATE_CUDA=1 $(MPIEXEC) -n $$n $(PY) -m mpi4py \
			-m pytest --only-mpi $(PYTEST_ARGS) $(EMULATED_TESTS); \
	done

# The installed tool, not the checkout: build the wheel, install it (no dependencies: the
# venv's) into a folder outside the checkout, and from a directory outside it run
# `hpcgnn model` (machine files), `jobs render` (job templates, a machine file's node) and
# a 2-rank `train`; then one's own graph: a PyG Data saved by torch.save and a
# benchmark-layout npz (examples/own_graph/write_inputs.py), each prepared and trained at
# 2 ranks.
WHEEL_DIR ?= build/wheel
.PHONY: wheel-check
wheel-check: setup
	rm -rf $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)
	$(PY) -m pip wheel -q --no-deps --no-build-isolation . -w $(WHEEL_DIR)/dist
	$(PY) -m pip install -q --no-deps --target $(WHEEL_DIR)/site $(WHEEL_DIR)/dist/hpcgnn-*.whl
	set -e; site=$(abspath $(WHEEL_DIR)/site); py=$(abspath $(PY)); \
	mpiexec=$(abspath $(MPIEXEC)); work=$$(mktemp -d); cd $$work; \
	export PYTHONPATH=$$site; \
	$$py -c "import hpcgnn, sys; assert hpcgnn.__file__.startswith('$$site'), hpcgnn.__file__"; \
	$$py -m hpcgnn model --shape 20000,320000,64,8 --procs 4 --machine laptop --top 3; \
	$$py -m hpcgnn jobs render --system local --nodes 1 --ranks-per-node 2 --out job.sh; \
	$$py -m hpcgnn jobs render --system slurm-cpu --nodes 2 --out cpu.sh; \
	$$py -m hpcgnn prepare synthetic --num-nodes 400 --feature-dim 8 --out g.h5 --quiet; \
	$$mpiexec -n 2 $$py -m hpcgnn train g.h5 --epochs 2 --quiet; \
	$$py $(abspath examples/own_graph/write_inputs.py) .; \
	$$py -m hpcgnn prepare pyg --file data.pt --out pyg.h5 --quiet; \
	$$py -m hpcgnn prepare npz --file graph.npz --split per-class --val-size 100 \
		--test-size 200 --row-normalize --out npz.h5 --quiet; \
	$$mpiexec -n 2 $$py -m hpcgnn train pyg.h5 --epochs 2 --quiet; \
	$$mpiexec -n 2 $$py -m hpcgnn train npz.h5 --epochs 2 --quiet; \
	cd /; rm -rf $$work; echo "wheel-check: the installed wheel works outside the checkout"
