#!/usr/bin/env bash
# The wheels the GPU machine lacks, for its Python 3.12 on x86-64, into .whl/ (ignored), and
# py-spy's binary as .whl/py-spy. The device has no package index: each `run` names .whl in
# `carry` and starts with the install line printed at the end. Run here, in the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.whl
mkdir -p "$dest"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
# Pinned to what the test suite runs here; the device's torch and transformers are its own.
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$dest" orjson==3.13.0 pybase64==1.5.1 av==18.1.0
# py-spy is a program, not a module: its binary travels beside the wheels (screen_calls --py-spy).
spy=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  "${platforms[@]}" -d "$spy" py-spy==0.4.1
python3 - "$spy" "$dest/py-spy" <<'PY'
import stat, sys, zipfile
from pathlib import Path
(wheel,) = Path(sys.argv[1]).glob("py_spy-*.whl")
with zipfile.ZipFile(wheel) as z:
    (name,) = [n for n in z.namelist() if n.endswith("/scripts/py-spy")]
    Path(sys.argv[2]).write_bytes(z.read(name))
Path(sys.argv[2]).chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
PY
rm -rf "$spy"
du -sh "$dest"
echo 'on the device: python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl'
