#!/bin/bash
# hpcgnn on a Slurm GPU machine like NERSC Perlmutter (4 A100 per node, Slingshot 11):
# {{nodes}} node(s) x {{ranks_per_node}} rank(s), one rank per GPU. Rendered by
#   {{command}}
#SBATCH --job-name=hpcgnn-{{mode}}-{{algo}}{{job_suffix}}
#SBATCH --nodes={{nodes}}
#SBATCH --ntasks-per-node={{ranks_per_node}}
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=32
#SBATCH --constraint=gpu
#SBATCH --time={{minutes}}
#SBATCH --account={{account}}
#SBATCH --output=hpcgnn-%j.out
set -euo pipefail

# GPU-aware Cray MPICH: device buffers are handed to MPI as they are. Needs mpi4py built on
# cray-mpich (make setup MPI=system MPICC="cc -shared"); set HPCGNN_CUDA_AWARE_MPI=0 to
# stage them through host memory instead.
export MPICH_GPU_SUPPORT_ENABLED=1
export HPCGNN_CUDA_AWARE_MPI=${HPCGNN_CUDA_AWARE_MPI:-1}
export OMP_NUM_THREADS=16  # 64 cores / 4 GPUs per node
LAUNCH=(srun --ntasks={{ranks}} --ntasks-per-node={{ranks_per_node}} --gpus-per-task=1
        --cpus-per-task=32 --cpu-bind=cores)

{{pipeline}}
