#!/usr/bin/env bash
# Installs modulecraft into a virtualenv: the one place that says what pip installs, and from where.
#   install.sh VENV runtime   the project (editable) and its dependencies: what `make lab` needs
#   install.sh VENV test      torch 2.13.0's CPU build, then the project with its test extra: what `make test` needs
#   install.sh VENV torch     torch alone
# VENV is created with $PYTHON (default python3) when it has no interpreter yet. pip's own configuration (its
# config files, PIP_* variables: a wheel folder, a mirror) applies to every step.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$1 target=$2
python=$venv/bin/python
pip=("$python" -m pip install --quiet)

torch_version=2.13.0
torch_cpu_index=${MODULECRAFT_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

install_torch() {
  case ${MODULECRAFT_OS:-$(uname -s)} in
    Linux)
      # On Linux, PyPI's torch is the CUDA build (with about 20 nvidia-*/triton wheels, several GB). The CPU build
      # is published as torch==X+cpu on PyTorch's own index: pinned with +cpu, no CUDA build can come in. pip's
      # configured sources are asked first, so that a wheel folder or a mirror holding it is enough and PyTorch's
      # index is not asked at all (an index pip cannot reach costs it about 7 s of retries per package).
      local requirement="torch==$torch_version+cpu"
      "${pip[@]}" "$requirement" >/dev/null 2>&1 && return
      echo "modulecraft: installing $requirement (the CPU build) from $torch_cpu_index"
      "${pip[@]}" --extra-index-url "$torch_cpu_index" "$requirement" && return
      echo "modulecraft: pip could not install $requirement from $torch_cpu_index. If that index is out of" \
           "reach here, point MODULECRAFT_TORCH_INDEX to a mirror of it, or put its wheel" \
           "(torch-$torch_version+cpu-*.whl) in a folder and set PIP_FIND_LINKS to that folder, then run the" \
           "command again." >&2
      return 1 ;;
    *)  # macOS and Windows: PyPI's wheels are the CPU builds (with Apple's MPS on macOS)
      "${pip[@]}" "torch==$torch_version" ;;
  esac
}

if [ ! -x "$python" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
  "${pip[@]}" --upgrade pip
fi
case $target in
  runtime) "${pip[@]}" -e . ;;
  # torch first, pinned: no other requirement can then resolve a newer torch (the test extra pins the same version)
  test)    install_torch && "${pip[@]}" -e ".[test]" ;;
  torch)   install_torch ;;
  *) echo "install.sh: unknown target $target (runtime, test or torch)" >&2; exit 2 ;;
esac
