#!/usr/bin/env bash
# Rebuild the dashboard's vendored Plotly (web/static/vendor/plotly.min.js): plotly.js's core and only
# the trace types the pages draw, bundled with esbuild as Plotly's own build does (global `Plotly`).
# The full bundle is 4.8 MB; the pages parse this one on every first visit.
#
#   scripts/build_plotly_bundle.sh            # needs node >= 20 and npm (the npm registry, once)
#
# A page that starts drawing a new trace type: add it to TRACES (`grep -rn 'scatter\|"bar"\|heatmap\|parcoords' web/static/js`)
# and run this again; the pages' URL carries the file's hash, so browsers fetch the new copy.
set -euo pipefail

PLOTLY_VERSION=4.1.1
ESBUILD_VERSION=0.25.12
BUFFER_VERSION=6.0.3  # scattergl's dependencies import node's `buffer`: the browser port
# scatter is in plotly.js's core; scattergl draws the compression chart past 1,000 points
TRACES=(bar heatmap parcoords scattergl)

repo=$(cd "$(dirname "$0")/.." && pwd)
out="$repo/web/static/vendor"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$work"
echo '{"name": "ptmlab-plotly-bundle", "private": true}' > package.json
npm install --silent --no-audit --no-fund "plotly.js@$PLOTLY_VERSION" "esbuild@$ESBUILD_VERSION" "buffer@$BUFFER_VERSION"

{
  echo "var Plotly = require('plotly.js/lib/core');"
  echo "Plotly.register(["
  for trace in "${TRACES[@]}"; do echo "  require('plotly.js/lib/$trace'),"; done
  echo "]);"
  echo "module.exports = Plotly;"
} > entry.js

traces="scatter ${TRACES[*]}"
# The settings of plotly.js's esbuild-config.js; its one CSS import belongs to the map traces, left out.
./node_modules/.bin/esbuild entry.js --bundle --minify --format=iife --global-name=Plotly --target=es2016 \
  --define:global=window --define:define.amd=false --alias:regl=@plotly/regl --alias:stream=stream-browserify \
  --loader:.css=empty --legal-comments=external --log-level=warning \
  --banner:js="/* plotly.js v$PLOTLY_VERSION, partial bundle: ${traces// /, } (scripts/build_plotly_bundle.sh). MIT licence: plotly.LICENSE.txt; bundled dependencies' notices: plotly.min.js.LEGAL.txt */" \
  --outfile="$work/plotly.min.js"

mkdir -p "$out"
cp "$work/plotly.min.js" "$out/plotly.min.js"
cp "$work/plotly.min.js.LEGAL.txt" "$out/plotly.min.js.LEGAL.txt"
cp node_modules/plotly.js/LICENSE "$out/plotly.LICENSE.txt"
echo "web/static/vendor/plotly.min.js: $(wc -c < "$out/plotly.min.js") bytes (plotly.js $PLOTLY_VERSION: $traces)"
