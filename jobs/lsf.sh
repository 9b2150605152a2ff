#!/bin/bash
# hpcgnn on an LSF/jsrun GPU machine ({{machine}}, e.g. OLCF Summit: 6 V100 per node, 2
# sockets x 21 cores): {{nodes}} node(s) x {{ranks_per_node}} rank(s), one rank per GPU,
# {{threads}} thread(s) each. Rendered by
#   {{command}}
# docs/jobs.md says where each line comes from.
#BSUB -J hpcgnn-{{mode}}-{{algo}}{{job_suffix}}
#BSUB -nnodes {{nodes}}
#BSUB -W {{minutes}}
#BSUB -P {{account}}
#BSUB -o hpcgnn-%J.out
{{directives}}
set -eo pipefail

{{environment}}
set -u

# One resource set per rank: 1 task, 1 GPU, {{cores_per_rank}} cores of one socket.
# CUDA-aware Spectrum MPI (--smpiargs "-gpu"): device buffers are handed to MPI as they are;
# set HPCGNN_CUDA_AWARE_MPI=0 (and drop --smpiargs) to stage them through host memory instead.
export OMP_NUM_THREADS={{threads}}
export HPCGNN_CUDA_AWARE_MPI=${HPCGNN_CUDA_AWARE_MPI:-1}
LAUNCH=(jsrun --smpiargs="-gpu" -n {{ranks}} -r {{ranks_per_node}} -a 1 -g 1
        -c {{cores_per_rank}} -b packed:{{cores_per_rank}})
# prepare and partition on a compute node (this script runs on a shared launch node): one
# resource set of one task and a socket's {{cores_per_socket}} cores
PREP=(jsrun -n 1 -r 1 -a 1 -g 0 -c {{cores_per_socket}} -b rs)

{{pipeline}}
