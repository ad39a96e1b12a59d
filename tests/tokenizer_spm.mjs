// tokenizer_spm.mjs - the references tests/tokenizer_spm.sh and bench/tokenizer_spm.sh hold zerotrain's
// SentencePiece-style tokenizer.json reader to (src/data/tokenizer_spm.c). Run by node 20:
//   node tokenizer_spm.mjs encode TOKENIZER.json TEXT [REPEAT]   the ids @huggingface/tokenizers gives for
//        TEXT (no special tokens added), one per line; with REPEAT, encodes REPEAT times and prints
//        "seconds N" (the best time) on stderr as well (the benchmark)
//   node tokenizer_spm.mjs encode-files TOKENIZER.json TEXT OUT [TEXT OUT ...]   the same ids for
//        each TEXT into its OUT, the tokenizer read once
//   node tokenizer_spm.mjs llama OUT.json      writes Llama 2's tokenizer.json rebuilt from the
//        vocabulary and merges llama-tokenizer-js ships (its data-conversion.py wrote them from Meta's
//        tokenizer.json: the vocabulary in id order, the merges in rank order as id pairs) with the
//        fields Llama 2's file has (normalizer Prepend + Replace, decoder Replace/ByteFallback/Fuse/
//        Strip, post_processor <s> A, added tokens <unk> <s> </s>)
//   node tokenizer_spm.mjs llama-cases OUT    the package's own test cases (made with the real
//        tokenizer: BOS then the ids) as lines "ids<TAB>JSON string"
import fs from "fs";
import path from "path";
import { createRequire } from "module";

const [cmd, a, b, c] = process.argv.slice(2);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const mods = process.env.ZT_NPM_DIR || path.join(root, ".deps/npm/node_modules");

if (cmd === "encode") {
  const { Tokenizer } = await import(path.join(mods, "@huggingface/tokenizers/dist/tokenizers.mjs"));
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(a, "utf8")), {});
  const text = fs.readFileSync(b, "utf8");
  let ids = null, best = Infinity;
  for (let r = 0; r < (c ? Number(c) : 1); r++) {
    const t0 = process.hrtime.bigint();
    ids = tok.encode(text, { add_special_tokens: false }).ids;
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  if (c) process.stderr.write(`seconds ${best} tokens ${ids.length}\n`);
  process.stdout.write(ids.join("\n") + "\n");
} else if (cmd === "encode-files") {
  // encode-files TOKENIZER.json TEXT OUT [TEXT OUT ...]: as encode, for each TEXT into its OUT, the
  // tokenizer read once
  const { Tokenizer } = await import(path.join(mods, "@huggingface/tokenizers/dist/tokenizers.mjs"));
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(a, "utf8")), {});
  const rest = process.argv.slice(4);
  for (let i = 0; i + 1 < rest.length; i += 2) {
    const ids = tok.encode(fs.readFileSync(rest[i], "utf8"), { add_special_tokens: false }).ids;
    fs.writeFileSync(rest[i + 1], ids.join("\n") + "\n");
  }
} else if (cmd === "llama" || cmd === "llama-cases") {
  const src = fs.readFileSync(path.join(mods, "llama-tokenizer-js/llama-tokenizer.js"), "utf8");
  if (cmd === "llama-cases") {
    const out = [];
    for (const m of src.matchAll(/testCase\(\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*,\s*\[([\d,\s]+)\]\)/g)) {
      const s = Function(`return ${m[1]}`)();
      out.push(m[2].split(",").map((x) => x.trim()).join(" ") + "\t" + JSON.stringify(s));
    }
    fs.writeFileSync(a, out.join("\n") + "\n");
  } else {
    const b64 = (name) => Buffer.from(src.match(new RegExp(`const ${name} = "([^"]*)"`))[1], "base64");
    const vocab = b64("llama_vocab_base64").toString("utf8").split("\n");
    const mb = b64("llama_merges_binary");
    const merges = [];
    for (let i = 0; i + 3 < mb.length; i += 4) merges.push(vocab[mb.readUInt16LE(i)] + " " + vocab[mb.readUInt16LE(i + 2)]);
    const added = ["<unk>", "<s>", "</s>"].map((content, id) => ({ id, content, single_word: false, lstrip: false,
      rstrip: false, normalized: false, special: true }));
    const t = {
      version: "1.0", truncation: null, padding: null, added_tokens: added,
      normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "\u2581" },
        { type: "Replace", pattern: { String: " " }, content: "\u2581" }] },
      pre_tokenizer: null,
      post_processor: { type: "TemplateProcessing", single: [{ SpecialToken: { id: "<s>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } }], pair: [{ SpecialToken: { id: "<s>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "<s>", type_id: 1 } },
        { Sequence: { id: "B", type_id: 1 } }], special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } } },
      decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "\u2581" }, content: " " },
        { type: "ByteFallback" }, { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }] },
      model: { type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null,
        end_of_word_suffix: null, fuse_unk: true, byte_fallback: true,
        vocab: Object.fromEntries(vocab.map((p, i) => [p, i])), merges },
    };
    fs.writeFileSync(a, JSON.stringify(t));
  }
} else {
  process.stderr.write("usage: tokenizer_spm.mjs encode TOKENIZER.json TEXT [REPEAT] | encode-files TOKENIZER.json TEXT OUT... | llama OUT.json | llama-cases OUT\n");
  process.exit(2);
}
