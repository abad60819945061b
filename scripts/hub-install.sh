#!/usr/bin/env bash
# Installs what a JupyterHub for the course needs on one machine (run as root):
#   hub-install.sh [PREFIX]     (default /opt/modulecraft-hub; `make test` installs into the repository's .hub)
# PREFIX/modulecraft  a copy of this checkout, world-readable except course/source (the hidden tests: root only)
# PREFIX/venv         a virtualenv made from Debian's /usr/bin/python3 (an interpreter every user can run: the one
#                     under /root cannot be run by learners), with the project, jupyterhub and nbgrader
# PREFIX/proxy        configurable-http-proxy from npm (node_modules/.bin/configurable-http-proxy)
# nbgrader's Lab and server extensions are installed with it; the learner-facing ones stay enabled for everyone
# and the instructor's (formgrader's server extension, course list, create assignment) are enabled per instructor
# by hub/jupyterhub_config.py; Lab's formgrader panel stays off (formgrader opens in a tab of its own).
# Re-running updates the copy and installs only what changed.
set -euo pipefail
checkout=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-/opt/modulecraft-hub}
python=${HUB_PYTHON:-/usr/bin/python3}
jupyterhub_version=6.1.1
chp_version=5.3.0

[ "$(id -u)" = 0 ] || { echo "hub-install.sh: run as root (it installs for every user of the hub)" >&2; exit 1; }
command -v npm >/dev/null || { export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; }
"$python" -c 'import venv, ensurepip' 2>/dev/null || { export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; }

mkdir -p "$prefix" && chmod 755 "$prefix"
# The copy: the checkout's files (tracked and new, not ignored ones such as .venv or .grading).
copy=$prefix/modulecraft
# Made anew each time (files the checkout no longer has, such as a renumbered chapter, must not linger), then
# put in place of the old one.
rm -rf "$copy.new" && mkdir -p "$copy.new"
(cd "$checkout" && git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"') \
  | (cd "$checkout" && tar --null -T - -cf -) | tar -xf - -C "$copy.new" --no-same-owner
chmod -R a+rX,go-w "$copy.new"
chmod 700 "$copy.new/course/source"  # solutions and hidden tests: the hub's course setup copies them for instructors
rm -rf "$copy" && mv "$copy.new" "$copy"

venv=$prefix/venv
stamp=$venv/.installed-hub
wanted=$(cat "$copy/pyproject.toml" "$copy/scripts/install.sh" "$0" | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  PYTHON=$python bash "$copy/scripts/install.sh" "$venv" runtime
  "$venv/bin/python" -m pip install --quiet "jupyterhub==$jupyterhub_version"
  # Instructors' extensions off for everyone; hub/jupyterhub_config.py turns them on in instructors' servers.
  for ext in formgrader course_list; do
    "$venv/bin/jupyter" server extension disable --sys-prefix "nbgrader.server_extensions.$ext" >/dev/null 2>&1
  done
  for ext in formgrader course-list create-assignment; do
    "$venv/bin/jupyter" labextension disable --level=sys_prefix "@jupyter/nbgrader:$ext" >/dev/null 2>&1
  done
  echo "$wanted" > "$stamp"
fi
chmod -R a+rX "$venv"

if [ ! -x "$prefix/proxy/node_modules/.bin/configurable-http-proxy" ]; then
  # npm's cache and logs in the prefix, not in root's home (then the cache goes: nothing reads it again)
  npm install --silent --no-audit --no-fund --logs-max=0 --cache "$prefix/proxy/.npm-cache" \
    --prefix "$prefix/proxy" "configurable-http-proxy@$chp_version" >/dev/null
  rm -rf "$prefix/proxy/.npm-cache"
fi
chmod -R a+rX "$prefix/proxy"
echo "modulecraft hub: installed in $prefix (jupyterhub $jupyterhub_version, configurable-http-proxy $chp_version)"
