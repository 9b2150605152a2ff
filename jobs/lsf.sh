#!/bin/bash
# hpcgnn on an LSF/jsrun GPU machine like OLCF Summit (6 V100 per node, 2 sockets x 21 cores):
# {{nodes}} node(s) x {{ranks_per_node}} rank(s), one rank per GPU. Rendered by
#   {{command}}
#BSUB -J hpcgnn-{{mode}}-{{algo}}{{job_suffix}}
#BSUB -nnodes {{nodes}}
#BSUB -W {{minutes}}
#BSUB -P {{account}}
#BSUB -o hpcgnn-%J.out
set -euo pipefail

# One resource set per rank: 1 task, 1 GPU, 7 cores. CUDA-aware Spectrum MPI (--smpiargs
# "-gpu"): device buffers are handed to MPI as they are; set HPCGNN_CUDA_AWARE_MPI=0 (and
# drop --smpiargs) to stage them through host memory instead.
export OMP_NUM_THREADS=7
export HPCGNN_CUDA_AWARE_MPI=${HPCGNN_CUDA_AWARE_MPI:-1}
LAUNCH=(jsrun --smpiargs="-gpu" -n {{ranks}} -r {{ranks_per_node}} -a 1 -g 1 -c 7 -b packed:7)

{{pipeline}}
