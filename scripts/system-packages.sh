#!/usr/bin/env bash
# Makes sure a system program the course needs is present, installing Debian's package when we are root.
#   system-packages.sh require graphviz   -> fail with instructions if `dot` cannot be had
#   system-packages.sh optional chromium  -> warn loudly (saying what goes without it) if it cannot be had
set -uo pipefail
mode=$1 package=$2
case $package in
  graphviz) program=dot;      debs="graphviz fonts-dejavu-core"
            advice="Debian/Ubuntu: sudo apt-get install graphviz fonts-dejavu-core | conda: conda install -c conda-forge graphviz | macOS: brew install graphviz"
            without="the course's drawings will show as text" ;;
  chromium) program=chromium; debs="chromium fonts-dejavu-core"
            advice="Debian/Ubuntu: sudo apt-get install chromium"
            without="the browser tests will be SKIPPED" ;;
  openssl)  program=openssl;  debs="openssl"
            advice="Debian/Ubuntu: sudo apt-get install openssl"
            without="the TLS test of the Dask guide will fail" ;;
  *) echo "system-packages.sh: unknown package $package" >&2; exit 2 ;;
esac

command -v "$program" >/dev/null 2>&1 && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "modulecraft: '$program' is missing; installing Debian's $debs ..."
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends $debs) >/tmp/modulecraft-apt.log 2>&1 \
    || echo "modulecraft: apt-get failed, see /tmp/modulecraft-apt.log" >&2
  command -v "$program" >/dev/null 2>&1 && exit 0
fi

if [ "$mode" = require ]; then
  echo "modulecraft: the '$program' program is required and was not found on PATH." >&2
  echo "  Install it, then run the command again.  $advice" >&2
  exit 1
fi
echo "################################################################################" >&2
echo "modulecraft: '$program' is not available: $without." >&2
echo "  $advice" >&2
echo "################################################################################" >&2
