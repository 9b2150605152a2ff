# ---- the pipeline (jobs/pipeline.sh, shared by every system): prepare, partition, train, report
# HPCGNN: the command, e.g. HPCGNN="python -m hpcgnn" to run a source checkout.
read -r -a HPCGNN <<< "${HPCGNN:-hpcgnn}"
GRAPH={{graph}}
RUN_DIR={{run_dir}}
PARTITION={{partition}}
mkdir -p "$RUN_DIR" "$(dirname "$GRAPH")"

# 1. prepare: reuse the graph file if it exists, else generate a synthetic one (for a real
#    data set, run `hpcgnn prepare ogb|planetoid|edgelist ... --out "$GRAPH"` once instead).
#    Steps 1 and 2 run on the batch node alone: for a large graph, prepare and partition it
#    in a small job first, so this allocation trains from the start.
if [ ! -f "$GRAPH" ]; then
    "${HPCGNN[@]}" prepare synthetic --generator sbm --num-nodes {{prepare_nodes}} --avg-degree 16 \
        --feature-dim 64 --classes 8 --seed 0 --quiet --out "$GRAPH"
fi

# 2. partition: only the partitioned models (--algo halo, --mode offload) use it; METIS
#    into one part per rank, once.
if [ "$PARTITION" = yes ]; then
    PARTED="$RUN_DIR/graph-p{{ranks}}.h5"
    if [ ! -f "$PARTED" ]; then
        "${HPCGNN[@]}" partition "$GRAPH" --parts {{ranks}} --method metis --quiet \
            --out "$PARTED"
    fi
    GRAPH=$PARTED
fi

# 3. train, one rank per GPU (rank 0's first line says the device and how its buffers reach
#    MPI; without --device: a GPU where one is visible, else the CPU).
"${LAUNCH[@]}" "${HPCGNN[@]}" train "$GRAPH" --mode {{mode}} {{algo_args}}\
    --epochs {{epochs}} {{device_args}}--metrics "$RUN_DIR/metrics.json" {{train_args}}

# 4. report: plots and index.md of the run (needs matplotlib, the `plot` extra).
"${HPCGNN[@]}" report "$RUN_DIR/metrics.json" --out "$RUN_DIR/report"
echo "metrics: $RUN_DIR/metrics.json, report: $RUN_DIR/report/index.md"
