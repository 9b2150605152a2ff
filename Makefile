# hpcgnn: the two entry points are `make run` (the main job) and `make test` (the suite).
# Both create or reuse the virtual environment $(VENV) and install everything into it.
#
#   make run                 4-rank training run on the generated default graph
#   make run NP=8 ALGO=1d    other rank counts / algorithms
#   make test                the whole test suite, serially and at 1, 2, 3 and 4 ranks
#   make ptx                 compile every cuda/*.cu to PTX (sm_80, sm_90; sm_70 where nvcc has it)
#
# Cluster MPI instead of the bundled MPICH wheel:  make setup MPI=system  (builds mpi4py
# against the `mpicc` on PATH) and  make run MPIEXEC="srun" .

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
MPI     ?= wheel
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

.PHONY: setup run test lint ptx clean-venv

$(VENV)/.installed-$(MPI): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
ifeq ($(MPI),system)
	$(PY) -m pip install -q --no-binary=mpi4py --no-cache-dir mpi4py
endif
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	rm -f $(VENV)/.installed-*
	touch $@

setup: $(VENV)/.installed-$(MPI)

$(GRAPH): | setup
	$(VENV)/bin/hpcgnn prepare synthetic --generator sbm --nodes 20000 --avg-degree 16 \
		--features 64 --classes 8 --seed 0 --out $(GRAPH)

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
	@echo "== grids, 3D on the 2x2x2 cube and GIST under a memory limit at 8 ranks"
	$(MPIEXEC) -n 8 $(PY) -m mpi4py -m pytest --only-mpi $(PYTEST_ARGS) \
		tests/grid/test_process_grid.py tests/models/test_summa.py::test_cube_2x2x2_at_8_ranks \
		tests/test_params_table.py tests/train/test_gist_memory.py

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

lint: setup
	$(VENV)/bin/ruff check hpcgnn tests perf

clean-venv:
	rm -rf $(VENV)
