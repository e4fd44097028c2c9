#!/usr/bin/env bash
# Idempotent setup on a bare Debian machine: .venv with the pinned requirements, the Debian
# packages the metrics need (Java for METEOR, WordNet 3.0), Chromium for the web demo's browser
# test, and NLTK's WordNet folder under data/.
# A second run only checks stamps and takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -c1-64)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  # torch first, on its own: a package that depends on torch must not pull the registry's CUDA build.
  .venv/bin/pip install --disable-pip-version-check -q "$(grep -E '^torch==' requirements.txt)"
  # DeepSpeed compiles its CUDA ops just in time on GPU machines; nothing to build at install.
  DS_BUILD_OPS=0 .venv/bin/pip install --disable-pip-version-check -q -r requirements.txt
  # The CAPTURE authors' package: CAPTURE's default stop list is read from it (as data, never
  # imported), and the parity tests score with it. Without its dependencies (they would pull its
  # own scene-graph parser and sentence encoder stack); the tests stub what it imports.
  .venv/bin/pip install --disable-pip-version-check -q --no-deps "capture-metric==0.1.13"
  # SAM 2 (annotation Stage 3 backend 'sam2'): a source package whose build imports torch and would
  # compile a CUDA extension; built against the venv's torch, without deps and without the extension.
  SAM2_BUILD_CUDA=0 .venv/bin/pip install --disable-pip-version-check -q --no-deps --no-build-isolation "sam2==1.1.0"
  # hydra-core declares omegaconf<2.4; SAM 2 runs with it on the omegaconf pinned in requirements.txt.
  .venv/bin/pip install --disable-pip-version-check -q --no-deps "hydra-core==1.3.2"
  echo "$want" > "$stamp"
fi

# The project's packages, importable from scripts/, bench/ and experiments/ without a PYTHONPATH
# (editable: the checkout's code runs). Again only when pyproject.toml changes.
pstamp=.venv/.pyproject.sha256
pwant=$(sha256sum pyproject.toml | cut -c1-64)
if [ "$(cat "$pstamp" 2>/dev/null || true)" != "$pwant" ]; then
  .venv/bin/pip install --disable-pip-version-check -q -e . --no-deps
  echo "$pwant" > "$pstamp"
fi

# Debian packages, only when missing.
need=()
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
[ -f /usr/share/wordnet/data.noun ] || need+=(wordnet-base)
[ -f /usr/share/wordnet/index.sense ] || need+=(wordnet-sense-index)
# the web demo's browser test drives Debian's Chromium (Playwright cannot download its own here)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# NLTK reads WordNet from <dir>/corpora/wordnet/, and needs a 'lexnames' file Debian does not
# ship: its rows (number, name, syntactic category) are rebuilt from the lexnames(5WN) man page.
wn=data/nltk_data/corpora/wordnet
if [ ! -f "$wn/lexnames" ]; then
  mkdir -p "$wn"
  find /usr/share/wordnet -maxdepth 1 -type f -exec cp {} "$wn/" \;
  zcat /usr/share/man/man5/lexnames.5WN.gz | awk -F'\t' '
    /^[0-9][0-9]\t/ { gsub(/ +$/, "", $2); split($2, p, ".");
      c = (p[1] == "noun") ? 1 : (p[1] == "verb") ? 2 : (p[1] == "adj") ? 3 : 4;
      print $1 "\t" $2 "\t" c }' > "$wn/lexnames.tmp"
  mv "$wn/lexnames.tmp" "$wn/lexnames"
fi
echo "setup: ready (.venv, Java, WordNet at $wn)"
