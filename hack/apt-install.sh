#!/usr/bin/env bash
# apt-install.sh PACKAGE COMMAND: installs Debian's PACKAGE with apt-get,
# with sudo when not root, unless COMMAND is already there. The tools that
# the Go module proxy and the npm registry do not serve (shellcheck,
# Chromium, busybox, npm itself) come from the machine's own packages.
set -euo pipefail
pkg=${1:?usage: apt-install.sh PACKAGE COMMAND}
cmd=${2:?usage: apt-install.sh PACKAGE COMMAND}

command -v "$cmd" >/dev/null && exit 0
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
