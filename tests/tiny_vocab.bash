# tiny_vocab.bash - sourced by the shell tests whose tiny GPT-2 trains on real text through the CLI:
# fold_tokens folds a token file's GPT-2 ids into TINY_VOCAB ids (id mod TINY_VOCAB, in place), so
# the test's model (model.vocab_size: $TINY_VOCAB) carries a 4,096-row embedding instead of
# 50,257 rows. The embedding was 98% of the tiny model's parameters and most of a 2-rank run's
# page faults and copies; these tests compare runs with each other (strategies, offload, resumes,
# faults), never with the language, so the folded ids serve them as well. Not a test by itself.
#   fold_tokens FILE...   each FILE an llm.c token file of uint16 ids (zerotrain tokenize's output)
# A script that needs GPT-2's whole vocabulary (a row whose files must outgrow a limit) sets
# TINY_VOCAB=50257 before sourcing this: the fold is then the identity.
TINY_VOCAB=${TINY_VOCAB:-4096}
fold_tokens() {
  /usr/bin/python3 - "$TINY_VOCAB" "$@" <<'PY'
import array, sys
vocab = int(sys.argv[1])
for path in sys.argv[2:]:
    with open(path, "rb") as f:
        data = f.read()
    header = array.array("i", data[:1024])
    if header[0] != 20240520 or header[1] != 1:
        sys.exit(f"fold_tokens: {path} is not an llm.c uint16 token file (magic {header[0]}, version {header[1]})")
    ids = array.array("H", data[1024:1024 + 2 * header[2]])
    folded = array.array("H", (t % vocab for t in ids))
    with open(path, "wb") as f:
        f.write(data[:1024] + folded.tobytes())
PY
}
