# Source on the GPU host (no package registry there): installs the carried wheels of Optuna and threadpoolctl
# (.whl/, fetched by ../shared/gpu/fetch-wheels.sh .whl threadpoolctl==3.8.0) into .site/ and puts the checkout on PYTHONPATH.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .site .whl/*.whl \
  && export PYTHONPATH=$PWD/.site:$PWD PYTHONUNBUFFERED=1
