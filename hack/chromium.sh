#!/usr/bin/env bash
# chromium.sh: prints the path of a Chromium or Chrome, installing Debian's
# chromium when there is none.
set -euo pipefail
chromium=$(command -v chromium || command -v google-chrome || true)
if [ -z "$chromium" ]; then
  "$(dirname "$0")/apt-install.sh" chromium chromium >&2
  chromium=$(command -v chromium)
fi
echo "$chromium"
