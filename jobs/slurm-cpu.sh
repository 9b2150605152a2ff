#!/bin/bash
# hpcgnn on a Slurm CPU cluster ({{machine}}, e.g. NERSC Perlmutter CPU: 2 x 64 cores per
# node): {{nodes}} node(s) x {{ranks_per_node}} rank(s), {{threads}} thread(s) each, a rank's
# cores within one socket. Rendered by
#   {{command}}
# docs/jobs.md says where each line comes from.
#SBATCH --job-name=hpcgnn-{{mode}}-{{algo}}{{job_suffix}}
#SBATCH --nodes={{nodes}}
#SBATCH --ntasks-per-node={{ranks_per_node}}
#SBATCH --cpus-per-task={{cpus_per_task}}
{{directives}}
#SBATCH --time={{minutes}}
#SBATCH --account={{account}}
#SBATCH --output=hpcgnn-%j.out
set -eo pipefail

{{environment}}
set -u

export OMP_NUM_THREADS={{threads}} OMP_PLACES=threads OMP_PROC_BIND=spread
LAUNCH=(srun --ntasks={{ranks}} --ntasks-per-node={{ranks_per_node}}
        --cpus-per-task={{cpus_per_task}} --cpu-bind=cores)
# prepare and partition: the batch script already runs on the first compute node
PREP=(env)

{{pipeline}}
