set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=src:.:/tmp/site
date -u; nproc
timeout 262 python3 -m benchmarks.sweep_mix --budget-s 245 --out $OUT 2>&1 | grep -v "Loading weights" > $OUT/mix.log; echo "rc=$?"
tail -c 9000 $OUT/mix.log
date -u
