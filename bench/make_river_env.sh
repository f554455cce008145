#!/usr/bin/env bash
# river for bench/verdict_quality.py, beside the project's own environment (river is not a runtime dependency):
# installed with its wheel alone (its numpy, scipy and pandas are the project's) into bench/.venv-river/lib, which git
# ignores. Run the benchmark with it on the path:
#   bench/make_river_env.sh [PYTHON]
#   PYTHONPATH=$PWD:bench/.venv-river/lib PYTHON bench/verdict_quality.py --seeds 5
# (a venv of its own works too: python3 -m venv bench/.venv-river && bench/.venv-river/bin/pip install -e
# '.[convert]' river==0.26.1)
set -euo pipefail
python="${1:-python3}"
here="$(cd "$(dirname "$0")" && pwd)"
"$python" -m pip install --quiet --no-deps --target "$here/.venv-river/lib" river==0.26.1
"$python" -c "import sys; sys.path.insert(0, '$here/.venv-river/lib'); import river; print('river', river.__version__)"
