#!/usr/bin/env bash
# chat_templates.sh - zerotrain's Jinja interpreter against the npm package @huggingface/jinja,
# byte for byte, on real chat templates.
#
#   bash tests/chat_templates.sh BUILD_DIR SOURCE_DIR        (ctest runs it so)
#
# 1. Every template of tests/data/chat_templates/ (63: llama.cpp's and chujiezheng/chat_templates'
#    templates of Llama 2/3.x, Mistral, Zephyr, Gemma, Qwen2.5, Phi-3/3.5/4, DeepSeek, Command-R,
#    Granite, Hermes, Functionary, ... ; its README says where each comes from) renders
#    every conversation of tests/data/chat_messages/ with and without add_generation_prompt, by
#    `zerotrain chat-template` and by the package in node (tests/chat_templates.js); the outputs
#    must be identical, or both must fail (a template raising on a bad role or order must raise in
#    both; the C message must carry the template's text).
# 2. With --spans, each assistant turn's span holds that message's content (trimmed), the spans
#    are in order inside the text, and the text equals the plain rendering; a template that is
#    not prefix-stable must say so (exit 3), never give spans.
# 3. The command's exit codes for usage, data and I/O errors.
# strftime_now sees one fixed instant on both sides (--now / $ZT_CHAT_NOW).
# Needs node and the package (scripts/setup.sh installs both); fails, never skips, without them.
set -euo pipefail

BUILD=${1:?usage: chat_templates.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: chat_templates.sh BUILD_DIR SOURCE_DIR}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$SRC" && pwd)
PKG=$SRC/.deps/npm/node_modules/@huggingface/jinja
VERSION=0.5.11

fail() {
    echo "chat_templates: FAIL: $*" >&2
    exit 1
}

command -v node >/dev/null || fail "node is not installed: run scripts/setup.sh"
[ -f "$PKG/package.json" ] || fail "$PKG is missing: run scripts/setup.sh (npm install @huggingface/jinja@$VERSION)"
grep -q "\"version\": \"$VERSION\"" "$PKG/package.json" || fail "$PKG is not @huggingface/jinja $VERSION"
ZT=$BUILD/zerotrain
[ -x "$ZT" ] || fail "$ZT is not built"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/zt_chat_templates.XXXXXX")
trap '[ -n "${ZT_KEEP:-}" ] || rm -rf "$WORK"' EXIT
export ZT_CHAT_NOW=1721995200 # 2024-07-26 12:00 UTC
export TZ=UTC LANG=C.UTF-8

TEMPLATES=("$SRC"/tests/data/chat_templates/*.jinja)
MESSAGES=("$SRC"/tests/data/chat_messages/*.json)
[ ${#TEMPLATES[@]} -ge 5 ] || fail "fewer than 5 templates under tests/data/chat_templates"

# --- 1. renderings ------------------------------------------------------------------------------
mkdir -p "$WORK/js" "$WORK/c"
{
    echo "["
    sep=""
    for t in "${TEMPLATES[@]}"; do
        tn=${t##*/} tn=${tn%.jinja}
        for m in "${MESSAGES[@]}"; do
            mn=${m##*/} mn=${mn%.json}
            for agp in false true; do
                id="${tn}__${mn}__$agp"
                printf '%s{"id": "%s", "template": "%s", "messages": "%s", "agp": %s, "bos": "<s>", "eos": "</s>"}\n' \
                    "$sep" "$id" "$t" "$m" "$agp"
                sep=","
            done
        done
    done
    echo "]"
} >"$WORK/cases.json"
node "$SRC/tests/chat_templates.js" "$PKG" "$WORK/cases.json" "$WORK/js" || fail "the node side failed"

# zerotrain's side: one process per rendering (their exit codes in rc.tsv), then every comparison
# in one python process (a cmp, grep or basename per case cost more than the renderings)
for t in "${TEMPLATES[@]}"; do
    tn=${t##*/} tn=${tn%.jinja}
    for m in "${MESSAGES[@]}"; do
        mn=${m##*/} mn=${mn%.json}
        for agp in false true; do
            id="${tn}__${mn}__$agp"
            flag=()
            [ "$agp" = true ] && flag=(--add-generation-prompt)
            set +e
            "$ZT" chat-template "$t" --messages "$m" "${flag[@]}" --bos "<s>" --eos "</s>" --now "$ZT_CHAT_NOW" \
                >"$WORK/c/$id.out" 2>"$WORK/c/$id.err"
            printf '%s\t%s\t%s\t%s\n' "$id" "$?" "$tn" "$t" >>"$WORK/rc.tsv"
            set -e
        done
    done
done
python3 - "$WORK" <<'PYEOF' || fail "renderings differ from @huggingface/jinja $VERSION"
import os, re, sys
work = sys.argv[1]
n_same = n_err = n_bad = 0
family_ok, raises = {}, {}
def rd(p, mode="rb"):
    with open(p, mode) as f:
        return f.read()
def bad(msg):
    global n_bad
    print("chat_templates: " + msg, file=sys.stderr)
    n_bad += 1
for line in rd(f"{work}/rc.tsv", "r").splitlines():
    case, rc, tn, tpath = line.split("\t")
    rc = int(rc)
    family_ok.setdefault(tn, True)
    js, c = f"{work}/js/{case}", f"{work}/c/{case}"
    before = n_bad
    if os.path.exists(js + ".out"):
        if rc != 0:
            bad(f"{case}: node renders, zerotrain fails (exit {rc}): {rd(c + '.err', 'r')}")
        elif rd(js + ".out") != rd(c + ".out"):
            a, b = rd(js + ".out"), rd(c + ".out")
            k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            bad(f"{case}: the renderings differ at byte {k}: node {a[k:k + 60]!r}, zerotrain {b[k:k + 60]!r}")
        else:
            n_same += 1
    elif rc != 3:
        bad(f"{case}: node fails ({rd(js + '.err', 'r')}), zerotrain exits {rc}, not 3")
    else:
        # a raise_exception text must come through
        js_msg = rd(js + ".err", "r")
        if tpath not in raises:
            raises[tpath] = re.search(r"raise_exception|raised", rd(tpath, "r")) is not None
        if raises[tpath] and js_msg not in rd(c + ".err", "r"):
            bad(f"{case}: node's error \"{js_msg}\" is not in zerotrain's: {rd(c + '.err', 'r')}")
        else:
            n_err += 1
    if n_bad != before:
        family_ok[tn] = False
for tn in sorted(t for t, ok in family_ok.items() if ok):
    print(f"chat_templates: identical: {tn}")
print(f"chat_templates: {n_same} renderings identical, {n_err} failing in both, {n_bad} different")
sys.exit(1 if n_bad else 0)
PYEOF

# --- 2. spans -----------------------------------------------------------------------------------
n_spans=0 n_unstable=0
WITH_ASSISTANT=()
for m in "${MESSAGES[@]}"; do grep -q '"assistant"' "$m" && WITH_ASSISTANT+=("$m"); done
for t in "${TEMPLATES[@]}"; do
    tn=${t##*/} tn=${tn%.jinja}
    for m in "${MESSAGES[@]}"; do
        mn=${m##*/} mn=${mn%.json}
        id="${tn}__${mn}__false"
        [ -f "$WORK/js/$id.out" ] || continue # the template refuses this conversation
        [[ " ${WITH_ASSISTANT[*]} " == *" $m "* ]] || continue
        set +e
        "$ZT" chat-template "$t" --messages "$m" --bos "<s>" --eos "</s>" --now "$ZT_CHAT_NOW" --spans \
            >"$WORK/sp_$id.out" 2>"$WORK/sp_$id.err"
        rc=$?
        set -e
        if [ $rc -eq 3 ] && grep -q "not prefix-stable" "$WORK/sp_$id.err"; then
            n_unstable=$((n_unstable + 1))
            continue
        fi
        [ $rc -eq 0 ] || fail "$id --spans: exit $rc: $(cat "$WORK/sp_$id.err")"
        printf '%s\t%s\t%s\t%s\t%s\n' "$WORK/sp_$id.out" "$WORK/sp_$id.err" "$m" "$id" "$WORK/js/$id.out" >>"$WORK/span_cases.tsv"
        n_spans=$((n_spans + 1))
    done
done
# every case's spans checked in one node process (one start-up instead of one per case)
node -e '
    const fs = require("fs");
    for (const row of fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean)) {
        const [tf, sf, mf, id, jf] = row.split("\t");
        const [text, spans, doc] = [fs.readFileSync(tf), fs.readFileSync(sf, "utf8"), JSON.parse(fs.readFileSync(mf, "utf8"))];
        const msgs = Array.isArray(doc) ? doc : doc.messages;
        let last = 0, n = 0;
        const bad = (why) => { console.error(`chat_templates: FAIL: ${id} --spans: ${why}`); process.exit(1); };
        if (!text.equals(fs.readFileSync(jf))) bad("the text is not the plain rendering");
        for (const line of spans.split("\n").filter((l) => l.startsWith("span\t"))) {
            const [, i, b, e] = line.split("\t").map(Number);
            if (msgs[i].role !== "assistant") bad(`span of message ${i}, a ${msgs[i].role}`);
            if (!(last <= b && b <= e && e <= text.length)) bad(`span ${b}-${e} out of order or bounds`);
            const content = typeof msgs[i].content === "string" ? msgs[i].content.trim() : "";
            if (!text.subarray(b, e).toString("utf8").includes(content))
                bad(`span ${b}-${e} of message ${i} lacks its content: ${JSON.stringify(text.subarray(b, e).toString())}`);
            last = e;
            n++;
        }
        if (n !== msgs.filter((m) => m.role === "assistant").length) bad(`${n} spans`);
    }
' "$WORK/span_cases.tsv" || exit 1
echo "chat_templates: spans checked on $n_spans conversations; $n_unstable refused as not prefix-stable"
[ $n_spans -ge 10 ] || fail "only $n_spans conversations had their spans checked"

# --- 3. exit codes ------------------------------------------------------------------------------
expect_rc() {
    local want=$1
    shift
    set +e
    "$@" >"$WORK/out.txt" 2>&1
    local rc=$?
    set -e
    [ "$rc" -eq "$want" ] || fail "'$*' exited with $rc, expected $want: $(cat "$WORK/out.txt")"
}
M=${MESSAGES[0]}
T=${TEMPLATES[0]}
expect_rc 0 "$ZT" chat-template --help
expect_rc 2 "$ZT" chat-template "$T"                                   # no --messages
expect_rc 2 "$ZT" chat-template --messages "$M"                        # no template
expect_rc 2 "$ZT" chat-template "$T" --messages "$M" --bogus
expect_rc 2 "$ZT" chat-template "$T" --messages "$M" --spans --add-generation-prompt
expect_rc 8 "$ZT" chat-template "$WORK/none.jinja" --messages "$M"
expect_rc 8 "$ZT" chat-template "$T" --messages "$WORK/none.json"
printf '{%% for x in y %%}never closed' >"$WORK/bad.jinja"
expect_rc 3 "$ZT" chat-template "$WORK/bad.jinja" --messages "$M"
grep -q "bad.jinja:1:" "$WORK/out.txt" || fail "a syntax error does not name the line: $(cat "$WORK/out.txt")"
printf '{"x": 1}' >"$WORK/tc.json"
expect_rc 3 "$ZT" chat-template "$WORK/tc.json" --messages "$M"
grep -q "chat_template" "$WORK/out.txt" || fail "a config without chat_template is not named: $(cat "$WORK/out.txt")"
printf '{"chat_template": "{{ bos_token }}{%% for m in messages %%}{{ m.content }}{%% endfor %%}", "bos_token": {"content": "<B>"}}' >"$WORK/tc.json"
expect_rc 0 "$ZT" chat-template "$WORK/tc.json" --messages "$M"
grep -q "^<B>" "$WORK/out.txt" || fail "bos_token of a tokenizer_config.json (an AddedToken object) not used"
printf 'not json' >"$WORK/m.json"
expect_rc 3 "$ZT" chat-template "$T" --messages "$WORK/m.json"
echo "chat_templates: PASS"
