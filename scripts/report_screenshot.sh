#!/usr/bin/env bash
# scripts/report_screenshot.sh REPORT.html OUT.png [WIDTHxHEIGHT]
#
# A screenshot of a `sirius tune` report (DIR/report.html) as a user's browser shows it: Debian's
# headless Chromium, 1280x2000 by default (the first screen and what follows). Chromium is
# installed with apt-get when /usr/bin/chromium is missing (needs root). Each run uses a new,
# empty profile directory (removed after) and turns off what would reach the network.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
    exit 2
fi
report=$1
out=$2
size=${3:-1280x2000}
if [[ ! -f $report ]]; then
    echo "$0: $report: no such file" >&2
    exit 2
fi
if [[ ! $size =~ ^[0-9]+x[0-9]+$ ]]; then
    echo "$0: $size: give the window size as WIDTHxHEIGHT" >&2
    exit 2
fi

chromium=/usr/bin/chromium
if [[ ! -x $chromium ]]; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "$0: $chromium is missing: apt-get install -y chromium (as root)" >&2
        exit 2
    fi
    echo "$0: installing Debian's chromium (apt-get install -y chromium)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2
fi

url="file://$(realpath "$report")"
out_abs="$(realpath -m "$out")"
mkdir -p "$(dirname "$out_abs")"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
rm -f "$out_abs"

"$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --window-size="${size/x/,}" \
    --screenshot="$out_abs" "$url" >"$profile/chromium.log" 2>&1 || {
    echo "$0: chromium failed; its output:" >&2
    cat "$profile/chromium.log" >&2
    exit 1
}
if [[ ! -s $out_abs ]]; then
    echo "$0: chromium wrote no screenshot; its output:" >&2
    cat "$profile/chromium.log" >&2
    exit 1
fi
echo "$out_abs"
