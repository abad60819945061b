#!/usr/bin/env bash
# Refuses an interpreter older than pyproject.toml's requires-python, in seconds and before pip downloads anything
# (pip would otherwise fail minutes later, on nbgrader 0.9.6's own requirement, with a long list of versions).
#   check-python.sh VENV PYTHON   checks VENV's interpreter when the venv exists, else PYTHON (the one it is made from)
set -uo pipefail
cd "$(dirname "$0")/.."
venv=$1 python=$2
[ -x "$venv/bin/python" ] && python=$venv/bin/python
minimum=$(sed -n 's/^requires-python = ">=\([0-9.]*\)".*/\1/p' pyproject.toml)
version=$("$python" -c "import sys; print('%d.%d' % sys.version_info[:2]); sys.exit(sys.version_info[:2] < (${minimum/./, }))" 2>&1)
case $? in
  0) exit 0 ;;
  1) echo "modulecraft: $python is Python $version; modulecraft needs Python >= $minimum (its grader, nbgrader 0.9.6," \
          "requires it)." >&2
     if [ "$python" = "$venv/bin/python" ]; then
       echo "  $venv was made with that Python: delete it, then run the command again with a newer one, e.g." \
            "make PYTHON=python$minimum" >&2
     else
       echo "  Install Python $minimum or newer (Debian/Ubuntu: apt-get install python$minimum python$minimum-venv;" \
            "conda: see environment.yml), then run the command again with it, e.g. make PYTHON=python$minimum" >&2
     fi ;;
  *) echo "modulecraft: cannot run the Python interpreter '$python' ($version)." >&2
     echo "  Install Python $minimum or newer, or name yours: make PYTHON=/path/to/python3" >&2 ;;
esac
exit 1
