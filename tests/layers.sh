#!/usr/bin/env bash
# layers.sh [BUILD] SOURCE - the layers hold and the files stay small. Owns the layer order (the one
# list below; docs/design.md's table states the same order, checked here too):
#   1. every folder of src/ is a layer of the list, and docs/design.md's table names the same
#      folders in the same order;
#   2. no file of src/ includes a file of a higher layer (an include resolves as the compiler's
#      does: the includer's folder, then src/, then include/; include/zerotrain/ is the public API,
#      below every layer); a violation prints the file, the line and the include;
#   3. no file of src/ passes 1,000 lines (named with its count);
#   4. docs/design.md's table names every .c file of src/ in its layer's row;
#   5. the environment is read in one place: no getenv in src/ outside core/env.c, whose table has a
#      row for every zt_env_var and each of its variables a row in docs/environment.md.
# `bash tests/layers.sh . .` runs it without a build (it reads only the sources).
set -uo pipefail
SRC="${2:-${1:-.}}"
cd "$SRC" || exit 1
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# ---- the layer order, bottom up: each layer includes only the ones below it ----------------------
LAYERS=(core obs kernels model shard comm precision optim offload memory scale data engine ckpt config
        metrics train cli)


declare -A RANK
for i in "${!LAYERS[@]}"; do RANK[${LAYERS[$i]}]=$i; done

# 1. every folder is placed, and design.md's table says the same order
for d in src/*/; do
  d="$(basename "$d")"
  [ -n "${RANK[$d]:-}" ] || bad "src/$d/ is not in the layer order (tests/layers.sh LAYERS): place it"
done
doc_order="$(sed -n '/^## The layers, bottom up/,/^## /p' docs/design.md |
             grep -o '^| [^|]* | `src/[a-z_]*/`' | sed 's/.*`src\/\([a-z_]*\)\/`/\1/' | tr '\n' ' ')"
if [ "$doc_order" = "${LAYERS[*]} " ]; then ok "docs/design.md's layers table is the order: ${LAYERS[*]}"
else bad "docs/design.md's layers table ($doc_order) is not tests/layers.sh's order (${LAYERS[*]})"; fi

# 2. includes go down (one awk pass: a fork per include took a minute on a busy 2-core machine)
report="$(find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.def' \) | sort |
  awk -v layers="${LAYERS[*]}" '
    function layer(p,   q) { q = substr(p, 5); sub(/\/.*/, "", q); return q }
    function norm(p,   n, parts, out, i, k) { # a/./b, a/x/../b -> a/b
      n = split(p, parts, "/"); k = 0
      for (i = 1; i <= n; i++) {
        if (parts[i] == "." || parts[i] == "") continue
        if (parts[i] == ".." && k > 0) { k--; continue }
        out[++k] = parts[i]
      }
      p = out[1]; for (i = 2; i <= k; i++) p = p "/" out[i]; return p
    }
    BEGIN { n = split(layers, L, " "); for (i = 1; i <= n; i++) RANK[L[i]] = i }
    { FILES[$0] = 1; order[++nf] = $0 }
    END {
      for (f = 1; f <= nf; f++) {
        file = order[f]; dir = file; sub(/\/[^\/]*$/, "", dir); ln = 0
        while ((getline text < file) > 0) {
          ln++
          if (text !~ /^[ \t]*#[ \t]*include[ \t]*"/) continue
          inc = text; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
          t = norm(dir "/" inc)
          if (!(t in FILES)) { t = norm("src/" inc); if (!(t in FILES)) continue } # the API or generated
          nin++
          from = layer(file); to = layer(t)
          if (from == to || !(from in RANK) || !(to in RANK)) continue
          if (RANK[to] > RANK[from]) { printf "FAIL %s:%d: #include \"%s\": %s includes %s, a higher layer\n", file, ln, inc, from, to; nbad++ }
        }
        close(file)
      }
      printf "COUNT %d %d\n", nin, nbad
    }')"
grep '^FAIL' <<<"$report" && fail=1
read -r _ n_inc n_bad < <(grep '^COUNT' <<<"$report")
[ "${n_inc:-0}" -gt 100 ] || bad "only ${n_inc:-0} includes resolved: is $PWD the source tree?"
[ "${n_bad:-0}" = 0 ] && ok "$n_inc includes inside src/, none to a higher layer"

# 3. no file passes 1,000 lines
n_big=0
while read -r count file; do
  [ "$file" = total ] && continue
  if [ "$count" -gt 1000 ]; then bad "$file: $count lines (the limit is 1,000: split it by concern)"; n_big=$((n_big + 1)); fi
done < <(find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.def' \) -print0 | xargs -0 wc -l)
[ "$n_big" = 0 ] && ok "every file of src/ has at most 1,000 lines"

# 4. every .c file has its line in design.md's table (its folder's row)
unnamed="$(sed -n '/^## The layers, bottom up/,/^## /p' docs/design.md | grep '^| ' |
  awk -v files="$(find src -name '*.c' | sort | tr '\n' ' ')" '
    { d = $0; if (match(d, /`src\/[a-z_]+\/`/)) ROW[substr(d, RSTART + 5, RLENGTH - 7)] = $0 }
    END {
      n = split(files, F, " ")
      for (i = 1; i <= n; i++) {
        f = F[i]; d = substr(f, 5); sub(/\/.*/, "", d); b = f; sub(/.*\//, "", b)
        row = ROW[d]
        if (index(row, "`" b "`") == 0 && index(row, "`" d "/" b "`") == 0)
          printf "FAIL %s: not named in docs/design.md'"'"'s row for src/%s/\n", f, d
      }
    }')"
if [ -n "$unnamed" ]; then echo "$unnamed"; fail=1; else ok "docs/design.md's table names every .c file of src/"; fi

# 5. getenv only in core/env.c; its table whole and documented
allowed=" src/core/env.c "
n_env=0
while IFS=: read -r f l _; do
  case "$allowed" in *" $f "*) continue ;; esac
  bad "$f:$l: getenv outside src/core/env.c (read it with zt_env, its row in env.c's table)"; n_env=$((n_env + 1))
done < <(grep -rn --include='*.c' --include='*.h' '\bgetenv[[:space:]]*(' src | grep -v '^[^:]*:[0-9]*:[[:space:]]*/\?\*')
[ "$n_env" = 0 ] && ok "no getenv in src/ outside core/env.c"
n_enum="$(sed -n '/^typedef enum zt_env_var/,/ZT_ENV_COUNT/p' src/core/env.h | grep -c '^[[:space:]]*ZT_ENV_[A-Z0-9_]*,')"
names="$(grep -o 'ROW(ZT_ENV_[A-Z0-9_]*, "[A-Za-z0-9_]*"' src/core/env.c | sed 's/.*"\(.*\)"/\1/')"
n_rows="$(grep -c . <<<"$names")"
[ "$n_enum" = "$n_rows" ] && ok "src/core/env.c: a row for each of the $n_enum zt_env_var values" ||
  bad "src/core/env.c: $n_rows rows for $n_enum zt_env_var values"
n_undoc=0
for v in $names; do
  grep -q "^| \`$v\` |" docs/environment.md || { bad "$v: in src/core/env.c's table, no row in docs/environment.md"; n_undoc=$((n_undoc + 1)); }
done
[ "$n_undoc" = 0 ] && ok "docs/environment.md has a row for each variable of src/core/env.c"
exit $fail
