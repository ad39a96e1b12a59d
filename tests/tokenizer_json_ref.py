#!/usr/bin/python3
"""tokenizer_json_ref.py - a plain-Python reference of Hugging Face byte-level BPE, to check
zerotrain's tokenizer.json reader (src/data/tokenizer_json.c) against an independent
implementation on a hand-made tokenizer.json with a Split (regex) pre-tokenizer:

  tokenizer_json_ref.py make CORPUS OUT.json N_MERGES [FIRST_MERGE_ID]   trains N_MERGES merges on
      CORPUS with Llama 3's pre-tokenizer regex and writes a Llama 3 style tokenizer.json
      (Sequence[Split(regex, Isolated), ByteLevel(use_regex=false)], ignore_merges, added tokens
      <|begin_of_text|> and <|end_of_text|>, merges as [a, b] pairs); with FIRST_MERGE_ID the ids
      256 .. FIRST_MERGE_ID - 1 are filler pieces no text produces (bytes 0x00 0x01 then a number)
      and the merged pieces and added tokens come after them: a vocabulary of any size, e.g. above
      65535 ids as Llama 3's 128256;
  tokenizer_json_ref.py encode TOKENIZER.json TEXT      prints the ids of TEXT, one per line, as
      the tokenizers library computes them: added tokens split the text first (leftmost, longest),
      each span is split by the regex (gaps kept as pieces), each piece mapped to GPT-2's byte
      characters and merged pair by lowest rank (or taken whole under ignore_merges).
Uses the `regex` module (python3-regex) for \\p{L} / \\p{N}."""
import collections
import json
import sys

import regex

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2C = byte_chars()


def pieces(text, pattern):
    out, pos = [], 0
    for m in regex.finditer(pattern, text):
        if m.start() > pos:
            out.append(text[pos:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def to_chars(s):
    return "".join(B2C[b] for b in s.encode("utf-8"))


def merge(w, a, b):
    """w with every (a, b) pair, left to right, replaced by a + b."""
    i, o = 0, []
    while i < len(w):
        if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
            o.append(a + b)
            i += 2
        else:
            o.append(w[i])
            i += 1
    return o


def make(corpus, out, n_merges, first_merge_id=256):
    text = open(corpus, encoding="utf-8", newline="").read()
    words = collections.Counter(tuple(to_chars(p)) for p in pieces(text, LLAMA3))
    vocab = {B2C[b]: i for i, b in enumerate(sorted(B2C))}
    for i in range(256, first_merge_id):
        vocab["".join(B2C[b] for b in b"\x00\x01%d" % i)] = i
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[a, b] += c
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append([a, b])
        vocab.setdefault(a + b, len(vocab))
        nw = collections.Counter()
        for w, c in words.items():
            nw[tuple(merge(w, a, b))] += c
        words = nw
    n = len(vocab)
    added = [{"id": n, "content": "<|begin_of_text|>", "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True},
             {"id": n + 1, "content": "<|end_of_text|>", "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                     "vocab": vocab, "merges": merges}}
    json.dump(tok, open(out, "w", encoding="utf-8"), ensure_ascii=False)


def bpe(word, ranks):
    w = list(word)
    while len(w) > 1:
        best = min(((ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(w, w[1:]))))
        if best[0] == 1 << 30:
            break
        w = merge(w, w[best[1]], w[best[1] + 1])
    return w


def encode(tok_path, text_path):
    tok = json.load(open(tok_path, encoding="utf-8"))
    m = tok["model"]
    vocab = m["vocab"]
    ranks = {tuple(x.split(" ") if isinstance(x, str) else x): r for r, x in enumerate(m["merges"])}
    pt = tok["pre_tokenizer"]
    pattern = (pt["pretokenizers"][0]["pattern"]["Regex"] if pt["type"] == "Sequence" else
               r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
    added = {a["content"]: a["id"] for a in tok["added_tokens"]}
    text = open(text_path, encoding="utf-8", newline="").read()
    ids = []
    pos = 0
    while pos <= len(text):
        hits = [(text.find(c, pos), -len(c), c) for c in added if text.find(c, pos) >= 0]
        at, _, which = min(hits) if hits else (len(text), 0, None)
        for p in pieces(text[pos:at], pattern):
            chars = to_chars(p)
            if m.get("ignore_merges") and chars in vocab:
                ids.append(vocab[chars])
            else:
                ids.extend(vocab[s] for s in bpe(chars, ranks))
        if which is None:
            break
        ids.append(added[which])
        pos = at + len(which)
    print("\n".join(map(str, ids)))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 256)
    else:
        encode(sys.argv[2], sys.argv[3])
