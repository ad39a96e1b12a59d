// gguf.mjs - llama.cpp's side of tests/gguf.sh, through node-llama-cpp (its prebuilt CPU build;
// nothing is built or downloaded). Modes, each printing JSON on stdout:
//   probs GGUF IDS.json OUT.f32  the next-token probabilities after every prefix of the ids (fp32
//                                rows of V: llama.cpp's softmax at temperature 1 over all tokens),
//                                KV cache in f32, flash attention off
//   tokenize GGUF TEXT_FILE      {"ids": llama.cpp's ids of the text, no BOS or special tokens}
//   template GGUF MESSAGES.json  {"text": the GGUF's tokenizer.chat_template rendered by llama.cpp's
//                                own Jinja engine with add_generation_prompt true}, {"meta": ...}
import fs from "node:fs";
import path from "node:path";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const mods = process.env.ZT_NPM_DIR || path.join(root, ".deps/npm/node_modules");
const { getLlama, LlamaLogLevel } = await import(path.join(mods, "node-llama-cpp/dist/index.js"));

const [mode, gguf, arg, out] = process.argv.slice(2);
const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                               progressLogs: false, logLevel: LlamaLogLevel.error, maxThreads: 1 });
const model = await llama.loadModel({ modelPath: gguf, gpuLayers: 0 });
if (mode === "probs") {
  const ids = JSON.parse(fs.readFileSync(arg, "utf8"));
  const context = await model.createContext({ contextSize: Math.max(32, ids.length), batchSize: ids.length,
                                              flashAttention: false, experimentalKvCacheKeyType: "F32",
                                              experimentalKvCacheValueType: "F32", threads: 1 });
  const seq = context.getSequence();
  const opts = { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 1 };
  const res = await seq.controlledEvaluate(ids.map((t) => [t, { generateNext: { probabilities: true, options: opts } }]));
  const nv = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
  const buf = new Float32Array(ids.length * nv);
  res.forEach((r, i) => { for (const [tok, p] of r.next.probabilities) buf[i * nv + tok] = p; });
  fs.writeFileSync(out, Buffer.from(buf.buffer));
  console.log(JSON.stringify({ n: ids.length, V: nv, entries: res[0].next.probabilities.size }));
} else if (mode === "tokenize") {
  console.log(JSON.stringify({ ids: model.tokenize(fs.readFileSync(arg, "utf8"), false) }));
} else if (mode === "template") {
  const msgs = JSON.parse(fs.readFileSync(arg, "utf8"));
  const tok = model.fileInfo.metadata.tokenizer;
  const t = tok.ggml.tokens;
  const r = new llama._bindings.AddonJinjaRenderer(tok.chat_template);
  console.log(JSON.stringify({ text: r.render({ messages: msgs, add_generation_prompt: true,
                                               bos_token: t[tok.ggml.bos_token_id], eos_token: t[tok.ggml.eos_token_id] }) }));
}
await model.dispose();
await llama.dispose();
