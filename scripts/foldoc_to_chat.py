#!/usr/bin/env python3
"""foldoc_to_chat.py - the Free On-line Dictionary of Computing (Debian's dict-foldoc package,
/usr/share/dictd/foldoc.dict.dz) as chat records, one JSON object per line, as transformers and TRL
read conversations:
  {"messages": [{"role": "system", "content": ...}, {"role": "user", "content": "What is TERM?"},
                {"role": "assistant", "content": the first paragraph of its definition}]}
The dictionary's cross-reference braces ({word}) become plain words; entries whose first paragraph
is a bare "See X" or longer than --max-words words are left out (counted on stderr).

  python3 scripts/foldoc_to_chat.py OUT.jsonl [--dict PATH] [--max-words N]
"""
import argparse
import gzip
import json
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--dict", default="/usr/share/dictd/foldoc.dict.dz")
ap.add_argument("--max-words", type=int, default=60)
a = ap.parse_args()

text = gzip.open(a.dict, "rt", encoding="utf-8", errors="replace").read()
entries, term, body = [], None, []
for line in text.split("\n"):
    if line and not line[0].isspace():  # a headword starts an entry
        if term is not None:
            entries.append((term, body))
        term, body = line.strip(), []
    elif term is not None:
        body.append(line.strip())
if term is not None:
    entries.append((term, body))

SYSTEM = "You are a dictionary of computing. Answer in one paragraph."
kept = skipped = 0
with open(a.out, "w", encoding="utf-8") as out:
    for term, body in entries:
        paras, cur = [], []
        for line in body:
            if line:
                cur.append(line)
            elif cur:
                paras.append(" ".join(cur))
                cur = []
        if cur:
            paras.append(" ".join(cur))
        paras = [p for p in paras if not re.fullmatch(r"\(\d{4}-\d{2}-\d{2}\)", p)]
        if not paras or term.startswith("00-database"):
            skipped += 1
            continue
        answer = re.sub(r"\{([^{}]*)\}", r"\1", paras[0])
        answer = re.sub(r"\s+", " ", answer).strip()
        words = answer.split()
        if (len(words) > a.max_words or len(words) < 3 or answer.lower().startswith("see ")
                or answer.startswith("<introduction>")):
            skipped += 1
            continue
        rec = {"messages": [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": f"What is {term}?"},
                            {"role": "assistant", "content": answer}]}
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        kept += 1
print(f"foldoc_to_chat: {kept} records written to {a.out}, {skipped} entries left out", file=sys.stderr)
