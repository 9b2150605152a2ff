#!/bin/bash
# hpcgnn on a Slurm GPU machine ({{machine}}, e.g. NERSC Perlmutter: 4 A100 per node):
# {{nodes}} node(s) x {{ranks_per_node}} rank(s), one rank per GPU, {{threads}} thread(s) each.
# Rendered by
#   {{command}}
# docs/jobs.md says where each line comes from.
#SBATCH --job-name=hpcgnn-{{mode}}-{{algo}}{{job_suffix}}
#SBATCH --nodes={{nodes}}
#SBATCH --ntasks-per-node={{ranks_per_node}}
#SBATCH --cpus-per-task={{cpus_per_task}}
#SBATCH --gpus-per-node={{ranks_per_node}}
#SBATCH --gpu-bind=none
{{directives}}
#SBATCH --time={{minutes}}
#SBATCH --account={{account}}
#SBATCH --output=hpcgnn-%j.out
set -eo pipefail

{{environment}}
set -u

# Every rank sees all the node's GPUs (--gpu-bind=none: no GPU cgroup per task, which would
# break CUDA IPC inside Cray MPICH) and takes GPU (node-local rank mod visible GPUs).
# GPU-aware Cray MPICH: device buffers are handed to MPI as they are. mpi4py must be built
# with the GPU transport layer linked (craype-accel-nvidia80 loaded: make setup MPI=system
# MPICC="cc -target-accel=nvidia80 -shared"); set HPCGNN_CUDA_AWARE_MPI=0 to stage them
# through host memory instead.
export HPCGNN_CUDA_AWARE_MPI=${HPCGNN_CUDA_AWARE_MPI:-1}
# No OMP_PROC_BIND/OMP_PLACES here: they pin the main thread, and with it the threads the
# CUDA runtime starts, to one core (the CPU template sets them).
export OMP_NUM_THREADS={{threads}}
LAUNCH=(srun --ntasks={{ranks}} --ntasks-per-node={{ranks_per_node}}
        --cpus-per-task={{cpus_per_task}} --cpu-bind=cores
        --gpus-per-node={{ranks_per_node}} --gpu-bind=none)
# prepare and partition: the batch script already runs on the first compute node
PREP=(env)

{{pipeline}}
