# ---- the pipeline (jobs/pipeline.sh, shared by every system): prepare, partition, train, report
HPCGNN=${HPCGNN:-hpcgnn}    # e.g. HPCGNN="python -m hpcgnn" to run a source checkout
GRAPH={{graph}}
RUN_DIR={{run_dir}}
mkdir -p "$RUN_DIR" "$(dirname "$GRAPH")"

# 1. prepare: reuse the graph file if it exists, else generate a synthetic one (for a real
#    data set, run `hpcgnn prepare ogb|planetoid|edgelist ... --out "$GRAPH"` once instead).
if [ ! -f "$GRAPH" ]; then
    $HPCGNN prepare synthetic --generator sbm --nodes {{prepare_nodes}} --avg-degree 16 \
        --features 64 --classes 8 --seed 0 --quiet --out "$GRAPH"
fi

# 2. partition: only the partitioned models (--algo halo, --mode offload) use it; METIS
#    into one part per rank, once.
if [ {{partition}} = yes ]; then
    PARTED="$RUN_DIR/graph-p{{ranks}}.h5"
    if [ ! -f "$PARTED" ]; then
        $HPCGNN partition "$GRAPH" --parts {{ranks}} --method metis --quiet --out "$PARTED"
    fi
    GRAPH=$PARTED
fi

# 3. train, one rank per GPU. There is no --device flag yet (the GPU backend is a later
#    issue): until then every rank computes on its CPU cores.
"${LAUNCH[@]}" $HPCGNN train "$GRAPH" --mode {{mode}} --algo {{algo}} --epochs {{epochs}} \
    --metrics "$RUN_DIR/metrics.json" {{train_args}}

# 4. report: plots and index.md of the run (needs matplotlib, the `plot` extra).
$HPCGNN report "$RUN_DIR/metrics.json" --out "$RUN_DIR/report"
echo "metrics: $RUN_DIR/metrics.json, report: $RUN_DIR/report/index.md"
