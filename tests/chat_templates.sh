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
#    `zerotrain chat-template --batch` (one process) and by the package in node
#    (tests/chat_templates.js, one process); the outputs must be identical, or both must fail (a
#    template raising on a bad role or order must raise in both; the C message must carry the
#    template's text). One corrupted rendering must make the comparison fail.
# 2. With --spans (one --batch process), each assistant turn's span holds that message's content
#    (trimmed), the spans are in order inside the text, and the text equals the plain rendering; a
#    template that is not prefix-stable must say so (exit 3), never give spans. A few cases of 1
#    and 2 go through the one-file command too: its stdout, stderr and exit status must be the
#    batch's byte for byte.
# 3. The command's exit codes for usage, data and I/O errors, --batch's included.
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
# every case in one node process and one `zerotrain chat-template --batch` process (a process per
# rendering cost a thousand start-ups); the batch renders a template's conversations one after
# another with it loaded once, so a variable leaking from one to the next (tools_simple.json's
# tools into unicode.json's rendering) would show as a difference from node
mkdir -p "$WORK/js" "$WORK/c" "$WORK/sp"
: >"$WORK/list.tsv"
: >"$WORK/ids.tsv"
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
                flags=-
                [ "$agp" = true ] && flags=agp
                printf '%s\t%s\t%s\t%s\n' "$t" "$m" "$flags" "$WORK/c/$id" >>"$WORK/list.tsv"
                printf '%s\t%s\t%s\n' "$id" "$tn" "$t" >>"$WORK/ids.tsv"
            done
        done
    done
    echo "]"
} >"$WORK/cases.json"
node "$SRC/tests/chat_templates.js" "$PKG" "$WORK/cases.json" "$WORK/js" || fail "the node side failed"
"$ZT" chat-template --batch "$WORK/list.tsv" --bos "<s>" --eos "</s>" --now "$ZT_CHAT_NOW" >"$WORK/rc.tsv" ||
    fail "chat-template --batch exited $?"

# every comparison in one python process (a cmp, grep or basename per case cost more than the
# renderings); it also writes samples.tsv: a few cases (the first plain and agp renderings, the
# first failure, a tool template's tools_simple.json and the conversation after it) for the
# one-file command to give byte for byte too
cat >"$WORK/compare.py" <<'PYEOF'
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
ids = [l.split("\t") for l in rd(f"{work}/ids.tsv", "r").splitlines()]
rcs = [l.split("\t") for l in rd(f"{work}/rc.tsv", "r").splitlines()]
lst = rd(f"{work}/list.tsv", "r").splitlines()
if len(rcs) != len(ids):
    bad(f"--batch gave {len(rcs)} statuses for {len(ids)} lines")
samples, kinds = [], set()
for k, ((case, tn, tpath), (out, rc)) in enumerate(zip(ids, rcs)):
    rc = int(rc)
    family_ok.setdefault(tn, True)
    js, c = f"{work}/js/{case}", f"{work}/c/{case}"
    if out != c:
        bad(f"--batch line {k + 1}: the status of {out}, not of {c}")
    before = n_bad
    if os.path.exists(js + ".out"):
        if rc != 0:
            bad(f"{case}: node renders, zerotrain fails (exit {rc}): {rd(c + '.err', 'r')}")
        elif rd(js + ".out") != rd(c + ".out"):
            a, b = rd(js + ".out"), rd(c + ".out")
            i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            bad(f"{case}: the renderings differ at byte {i}: node {a[i:i + 60]!r}, zerotrain {b[i:i + 60]!r}")
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
    kind = "fail" if rc else "agp" if case.endswith("__true") else "plain"
    tools = None # a tool template rendering tools_simple.json, and the conversation after it
    if rc == 0 and "tool" in tn and case.endswith("__tools_simple__true"):
        tools = "tools"
    elif rc == 0 and "tool" in tn and k > 0 and ids[k - 1][0].endswith("__tools_simple__true"):
        tools = "after tools"
    if kind not in kinds or (tools and tools not in kinds):
        kinds |= {kind, tools}
        samples.append(f"{lst[k]}\t{rc}")
if not {"tools", "after tools"} <= kinds:
    bad("no tool template renders tools_simple.json and the conversation after it")
with open(f"{work}/samples.tsv", "w") as f:
    f.write("".join(s + "\n" for s in samples))
for tn in sorted(t for t, ok in family_ok.items() if ok):
    print(f"chat_templates: identical: {tn}")
print(f"chat_templates: {n_same} renderings identical, {n_err} failing in both, {n_bad} different")
sys.exit(1 if n_bad else 0)
PYEOF
python3 "$WORK/compare.py" "$WORK" || fail "renderings differ from @huggingface/jinja $VERSION"
# the comparison can fail: one byte of one identical rendering changed must be caught and named
victim=$(awk -F'\t' '$2 == 0 {print $1; exit}' "$WORK/rc.tsv")
cp "$victim.out" "$WORK/victim.keep"
printf '\x01' | dd of="$victim.out" bs=1 seek=0 conv=notrunc status=none
python3 "$WORK/compare.py" "$WORK" >/dev/null 2>"$WORK/victim.err" && fail "a corrupted rendering ($victim.out) passed the comparison"
grep -q "the renderings differ at byte 0" "$WORK/victim.err" || fail "a corrupted rendering was not named: $(cat "$WORK/victim.err")"
cp "$WORK/victim.keep" "$victim.out"

# --- 2. spans -----------------------------------------------------------------------------------
# every conversation with an assistant turn that node renders, through one --batch process with
# spans; its statuses and span lines checked in one node process (which adds the first two span
# cases and the first refused one to samples.tsv)
WITH_ASSISTANT=()
for m in "${MESSAGES[@]}"; do grep -q '"assistant"' "$m" && WITH_ASSISTANT+=("$m"); done
: >"$WORK/span_list.tsv"
: >"$WORK/span_cases.tsv"
for t in "${TEMPLATES[@]}"; do
    tn=${t##*/} tn=${tn%.jinja}
    for m in "${MESSAGES[@]}"; do
        mn=${m##*/} mn=${mn%.json}
        id="${tn}__${mn}__false"
        [ -f "$WORK/js/$id.out" ] || continue # the template refuses this conversation
        [[ " ${WITH_ASSISTANT[*]} " == *" $m "* ]] || continue
        printf '%s\t%s\tspans\t%s\n' "$t" "$m" "$WORK/sp/$id" >>"$WORK/span_list.tsv"
        printf '%s\t%s\t%s\t%s\t%s\n' "$WORK/sp/$id.out" "$WORK/sp/$id.err" "$m" "$id" "$WORK/js/$id.out" >>"$WORK/span_cases.tsv"
    done
done
"$ZT" chat-template --batch "$WORK/span_list.tsv" --bos "<s>" --eos "</s>" --now "$ZT_CHAT_NOW" >"$WORK/span_rc.tsv" ||
    fail "chat-template --batch (spans) exited $?"
node -e '
    const fs = require("fs");
    const lines = (f) => fs.readFileSync(f, "utf8").split("\n").filter(Boolean);
    const [rows, rcs, list] = [lines(process.argv[1]), lines(process.argv[2]), lines(process.argv[3])];
    const bad = (id, why) => { console.error(`chat_templates: FAIL: ${id} --spans: ${why}`); process.exit(1); };
    if (rows.length !== rcs.length) bad("--batch", `${rcs.length} statuses for ${rows.length} lines`);
    let n_spans = 0, n_unstable = 0;
    const samples = [];
    rows.forEach((row, r) => {
        const [tf, sf, mf, id, jf] = row.split("\t");
        const [out, rc] = rcs[r].split("\t");
        if (`${out}.out` !== tf) bad(id, `line ${r + 1}: the status of ${out}`);
        const [text, spans, doc] = [fs.readFileSync(tf), fs.readFileSync(sf, "utf8"), JSON.parse(fs.readFileSync(mf, "utf8"))];
        if (rc === "3" && spans.includes("not prefix-stable")) {
            if (!n_unstable++) samples.push(`${list[r]}\t${rc}`);
            return;
        }
        if (rc !== "0") bad(id, `exit ${rc}: ${spans}`);
        const msgs = Array.isArray(doc) ? doc : doc.messages;
        let last = 0, n = 0;
        if (!text.equals(fs.readFileSync(jf))) bad(id, "the text is not the plain rendering");
        for (const line of spans.split("\n").filter((l) => l.startsWith("span\t"))) {
            const [, i, b, e] = line.split("\t").map(Number);
            if (msgs[i].role !== "assistant") bad(id, `span of message ${i}, a ${msgs[i].role}`);
            if (!(last <= b && b <= e && e <= text.length)) bad(id, `span ${b}-${e} out of order or bounds`);
            const content = typeof msgs[i].content === "string" ? msgs[i].content.trim() : "";
            if (!text.subarray(b, e).toString("utf8").includes(content))
                bad(id, `span ${b}-${e} of message ${i} lacks its content: ${JSON.stringify(text.subarray(b, e).toString())}`);
            last = e;
            n++;
        }
        if (n !== msgs.filter((m) => m.role === "assistant").length) bad(id, `${n} spans`);
        if (n_spans++ < 2) samples.push(`${list[r]}\t${rc}`);
    });
    fs.appendFileSync(process.argv[4], samples.map((s) => s + "\n").join(""));
    console.log(`chat_templates: spans checked on ${n_spans} conversations; ${n_unstable} refused as not prefix-stable`);
    if (n_spans < 10) bad("all", `only ${n_spans} conversations had their spans checked`);
' "$WORK/span_cases.tsv" "$WORK/span_rc.tsv" "$WORK/span_list.tsv" "$WORK/samples.tsv" || exit 1

# the one-file command on the samples: its stdout, stderr and exit status are byte for byte the
# batch's OUT.out, OUT.err and status
n_samples=0
while IFS=$'\t' read -r t m flags out status; do
    args=()
    [[ ",$flags," == *,agp,* ]] && args+=(--add-generation-prompt)
    [[ ",$flags," == *,spans,* ]] && args+=(--spans)
    set +e
    "$ZT" chat-template "$t" --messages "$m" "${args[@]}" --bos "<s>" --eos "</s>" --now "$ZT_CHAT_NOW" \
        >"$WORK/one.out" 2>"$WORK/one.err"
    rc=$?
    set -e
    [ "$rc" = "$status" ] || fail "${out##*/} ($flags): the one-file command exits $rc, --batch said $status"
    cmp -s "$WORK/one.out" "$out.out" || fail "${out##*/} ($flags): the one-file command's stdout is not --batch's $out.out"
    cmp -s "$WORK/one.err" "$out.err" || fail "${out##*/} ($flags): the one-file command's stderr is not --batch's $out.err"
    n_samples=$((n_samples + 1))
done <"$WORK/samples.tsv"
echo "chat_templates: the one-file command gives --batch's bytes, stderr and status on $n_samples cases"
[ $n_samples -ge 7 ] || fail "only $n_samples cases went through the one-file command"

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
# --batch: a bad line is exit 2 naming it, with nothing rendered (not even the good lines before it)
mkdir -p "$WORK/b"
good=$(printf '%s\t%s\t-\t%s' "$WORK/tc.json" "$M" "$WORK/b/good") # the template above that renders anything
expect_batch_rc() { # WANT LINE_NUMBER LINES...
    local want=$1 line=$2
    shift 2
    printf '%s\n' "$@" >"$WORK/b.tsv"
    rm -f "$WORK/b/"*
    expect_rc "$want" "$ZT" chat-template --batch "$WORK/b.tsv"
    [ -z "$line" ] || grep -q "b.tsv:$line:" "$WORK/out.txt" || fail "--batch does not name line $line: $(cat "$WORK/out.txt")"
    [ "$want" = 0 ] || [ ! -e "$WORK/b/good.out" ] || fail "--batch rendered a line of a list it refused"
}
expect_batch_rc 2 2 "$good" "$(printf '%s\t%s\t-' "$T" "$M")"                    # 3 fields
expect_batch_rc 2 2 "$good" "$(printf '%s\t%s\t-\t%s\tx' "$T" "$M" "$WORK/b/x")" # 5 fields
expect_batch_rc 2 3 "$good" "" "$(printf '%s\t%s\tagp,bogus\t%s' "$T" "$M" "$WORK/b/x")"
expect_batch_rc 2 1 "$(printf '%s\t%s\tagp,spans\t%s' "$T" "$M" "$WORK/b/x")"
expect_rc 2 "$ZT" chat-template --batch "$WORK/b.tsv" "$T"
expect_rc 2 "$ZT" chat-template --batch "$WORK/b.tsv" --spans
expect_rc 8 "$ZT" chat-template --batch "$WORK/none.tsv"
# a line's own failure is its status (the one-file command's), not the batch's; an OUT that cannot
# be written is exit 8
expect_batch_rc 0 "" "$good" "$(printf '%s\t%s\tagp\t%s' "$WORK/none.jinja" "$M" "$WORK/b/io")" \
    "$(printf '%s\t%s\t-\t%s' "$T" "$WORK/m.json" "$WORK/b/data")"
[ "$(cut -f2 "$WORK/out.txt" | tr '\n' ' ')" = "0 8 3 " ] || fail "--batch statuses: $(cat "$WORK/out.txt")"
grep -q "none.jinja" "$WORK/b/io.err" && grep -q "m.json" "$WORK/b/data.err" || fail "--batch's .err files do not name the file"
[ -s "$WORK/b/good.out" ] && [ ! -s "$WORK/b/good.err" ] || fail "--batch's good line has no text, or an error"
expect_batch_rc 8 "" "$(printf '%s\t%s\t-\t%s' "$T" "$M" "$WORK/b/no/such/dir/x")"
echo "chat_templates: PASS"
