#!/usr/bin/env bash
# One lease on a lent GPU machine: install polyc beside the machine's own
# Python (torch, CuPy, numpy are there), run the gpu-marked tests, the
# compute-sanitizer checks and the timing table of benchmarks/gpu.py.
#
# Wheels travel in .whl/ (islpy, cgen, pytools, lark, platformdirs, mako,
# siphash24 and a pycuda wheel built here with CUDA_ROOT=/usr/local/cuda for
# the machine's Python); see docs/cuda.md, "Running on a lent GPU".
# Logs go to $OUT (gpu_tests.log, sanitizer.log, bench.json, bench.md).
#   usage: bash benchmarks/gpu_lease.sh [tests|bench|all] [pytest -k expr]
set -u
what=${1:-all}
OUT=${OUT:-/tmp/polyc-lease}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 POLYC_CACHE_DIR=/tmp/polyc-cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 2
export PYTHONPATH=/tmp/site:$PWD
# the package maps polyc.frontend/polyc.backends to top-level folders: an
# editable install gives the same layout as the developers' virtual env
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 \
    || { tail -20 "$OUT/install.log"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import pycuda.driver as d; d.init(); print('pycuda sees', d.Device(0).name())" || exit 3
status=0
if [ "$what" = tests ] || [ "$what" = all ]; then
    timeout 180 python3 -m pytest -q -p no:cacheprovider -m gpu -n 12 --timeout 90 \
        ${2:+-k "$2"} tests/cuda/test_device.py >"$OUT/gpu_tests.log" 2>&1
    rc=$?; echo "gpu tests: rc=$rc"; tail -25 "$OUT/gpu_tests.log"; status=$((status || rc))
    code="import numpy as np, polyc; k = polyc.compile(open('examples/softmax.tc').read(), target='cuda'); k(np.random.rand(33, 70).astype(np.float32))"
    for tool in racecheck memcheck synccheck; do
        timeout 45 compute-sanitizer --tool=$tool --error-exitcode=1 python3 -c "$code" \
            >>"$OUT/sanitizer.log" 2>&1
        rc=$?; echo "sanitizer $tool: rc=$rc"; status=$((status || rc))
    done
    tail -8 "$OUT/sanitizer.log"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
    timeout 330 python3 -m benchmarks.gpu --skip-tests --device-only --json >"$OUT/bench.json" 2>"$OUT/bench.err"
    rc=$?; echo "benchmarks.gpu: rc=$rc"; tail -5 "$OUT/bench.err"; status=$((status || rc))
    python3 -m benchmarks.gpu --from-json "$OUT/bench.json" | tee "$OUT/bench.md"
fi
exit $status
