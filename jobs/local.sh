#!/bin/bash
# hpcgnn on this machine with mpiexec: {{ranks}} rank(s). Rendered by
#   {{command}}
# Run it as `bash job.sh`; MPIEXEC and HPCGNN override the launcher and the command.
set -euo pipefail

read -r -a LAUNCH <<< "${MPIEXEC:-mpiexec} -n {{ranks}}"
PREP=(env)

{{pipeline}}
