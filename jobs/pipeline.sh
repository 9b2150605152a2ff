# ---- the pipeline (jobs/pipeline.sh, shared by every system): prepare, partition, train, report
# VENV: the Python environment hpcgnn is installed in (jobs render --venv DIR; empty: none,
# hpcgnn on PATH as it is); HPCGNN_VENV overrides it.
VENV=${HPCGNN_VENV:-{{venv}}}
if [ -n "$VENV" ]; then
    if [ ! -f "$VENV/bin/activate" ]; then
        echo "hpcgnn job: error: no Python environment at $VENV: render with --venv DIR" \
            "(or --venv ''), or set HPCGNN_VENV" >&2
        exit 1
    fi
    # shellcheck source=/dev/null
    source "$VENV/bin/activate"
fi
# HPCGNN: the command, e.g. HPCGNN="python -m hpcgnn" to run a source checkout.
read -r -a HPCGNN <<< "${HPCGNN:-hpcgnn}"
GRAPH={{graph}}
RUN_DIR={{run_dir}}
PARTITION={{partition}}
# STEPS: all (this script prepares, partitions and trains), prepare (a single-node job that
# prepares and partitions only) or train (the job that depends on it: the inputs must exist)
STEPS={{steps}}
# GENERATE: a synthetic generator (sbm, rmat) asked for by `jobs render --generate`, or
# empty: then a GRAPH that does not exist is an error, never a made-up graph.
GENERATE={{generate}}
if [ "$STEPS" != train ] && [ ! -f "$GRAPH" ] && [ -z "$GENERATE" ]; then
    echo "hpcgnn job: error: $GRAPH does not exist: prepare it first (hpcgnn prepare" \
        "ogb|planetoid|edgelist|... --out $GRAPH), or render with --generate sbm" >&2
    exit 1
fi
mkdir -p "$RUN_DIR" "$(dirname "$GRAPH")"
PARTED="$RUN_DIR/graph-p{{parts}}.h5"

if [ "$STEPS" != train ]; then
    # Steps 1 and 2 run under PREP, on a compute node (LSF's batch script runs on a launch
    # node: there PREP is a one-task jsrun).
    # 1. prepare: the graph file as it is; generated only when it is missing and the script
    #    was rendered with --generate (a real data set: `hpcgnn prepare ogb|planetoid|
    #    edgelist ... --out "$GRAPH"` once). With STEPS=all steps 1 and 2 run on the batch
    #    node alone while the others wait: for a large graph render with --prepare-job, which
    #    runs them in a one-node job.
    if [ ! -f "$GRAPH" ]; then
        "${PREP[@]}" "${HPCGNN[@]}" prepare synthetic --generator "$GENERATE" \
            --num-nodes {{prepare_nodes}} --avg-degree 16 --feature-dim 64 --classes 8 \
            --seed 0 --quiet --out "$GRAPH"
    fi
    # 2. partition: only the partitioned models (--algo halo, --mode offload) use it; METIS
    #    into one part per rank of the training job, once.
    if [ "$PARTITION" = yes ] && [ ! -f "$PARTED" ]; then
        "${PREP[@]}" "${HPCGNN[@]}" partition "$GRAPH" --parts {{parts}} --method metis \
            --quiet --out "$PARTED"
    fi
fi
if [ "$PARTITION" = yes ]; then
    GRAPH=$PARTED
fi
if [ "$STEPS" = prepare ]; then
    echo "prepared: $GRAPH"
    exit 0
fi
if [ ! -f "$GRAPH" ]; then
    echo "hpcgnn job: error: $GRAPH does not exist: run the prepare job first" >&2
    exit 1
fi

# 3. train, one rank per GPU (rank 0's first line says the device and how its buffers reach
#    MPI; without --device: a GPU where one is visible, else the CPU).
"${LAUNCH[@]}" "${HPCGNN[@]}" train "$GRAPH" --mode {{mode}} {{algo_args}}\
    --epochs {{epochs}} {{device_args}}--metrics "$RUN_DIR/metrics.json" {{train_args}}

# 4. report: plots and index.md of the run (needs matplotlib, the `plot` extra).
"${HPCGNN[@]}" report "$RUN_DIR/metrics.json" --out "$RUN_DIR/report"
echo "metrics: $RUN_DIR/metrics.json, report: $RUN_DIR/report/index.md"
