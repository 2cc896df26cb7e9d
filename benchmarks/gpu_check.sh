#!/usr/bin/env bash
# The GPU session's check, run from the repository root on a machine with CuPy and a GPU and without
# network: the CUDA device tests, the op suite's cuda:0 items, then `python -m benchmarks.cuda`.
# Packages the machine lacks travel as wheels in .whl/ (installed into /tmp/site); OUT names a folder
# for the logs (default: gpu_check_out). Each step has its own time limit so that a slow one still
# leaves the others their turn; a limit reached interrupts pytest, which still prints its summary.
set -uo pipefail
out="${OUT:-gpu_check_out}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD"
fi
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
nvidia-smi -L
python3 -c "import cupy, numpy, pytest; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'pytest', pytest.__version__); print(cupy.cuda.runtime.getDeviceCount(), 'GPU(s)')"
xdist=()
python3 -c "import xdist" 2> /dev/null && xdist=(-n "${GPU_CHECK_WORKERS:-8}")

echo "== the CUDA device tests"
timeout -s INT "${GPU_CHECK_DEVICES_S:-90}" python3 -m pytest -q -p no:cacheprovider -o addopts="" -rfEs \
    tests/devices 2>&1 | tee "$out/devices.log" | tail -60

echo "== python -m benchmarks.cuda"
timeout -s INT "${GPU_CHECK_BENCH_S:-90}" python3 -m benchmarks.cuda --json "$out/cuda_bench.json" 2>&1 \
    | tee "$out/bench.log" | tail -40

echo "== the op suite's cuda:0 items"
timeout -s INT "${GPU_CHECK_OPS_S:-200}" python3 -m pytest -q -p no:cacheprovider -o addopts="-m 'not slow'" -rfE \
    "${xdist[@]}" -k "cuda" tests/ops 2>&1 | tee "$out/ops.log" | grep -E "^(FAILED|ERROR)|passed|failed" \
    | cut -c1-300 | tail -80
