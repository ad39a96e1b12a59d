// gguf.mjs JOBS.json - llama.cpp's side of tests/gguf.sh, through node-llama-cpp 3.21.1 (its prebuilt
// CPU build of llama.cpp; nothing is built or downloaded), in one process (start-up and each model's
// load cost ~1.5 s). JOBS.json: a list of {"gguf": FILE, and any of
//   "probs": {"ids": [...], "positions": [...], "out": FILE[, "lora": FILE]}
//       the next-token probabilities after the prefix ids[0..t] for each t of positions, as fp32 rows
//       of V in that order: llama.cpp's softmax at temperature 1 over every token (no top-k/p, min-p);
//       KV cache in f32, flash attention off, a context larger than the window (a context of exactly
//       the window's length gave another last row); with "lora", that LoRA adapter GGUF applied to
//       the model at scale 1 (createContext's lora option: llama.cpp's --lora)
//   "tokenize": [{"text": FILE, "out": FILE}]   {"ids": llama.cpp's ids of the text: no BOS, special
//       tokens as text} as JSON
//   "template": {"messages": FILE, "out": FILE} the GGUF's tokenizer.chat_template rendered by
//       llama.cpp's own Jinja engine (not node-llama-cpp's JavaScript one) with add_generation_prompt,
//       bos_token and eos_token from the GGUF's ids
// }.
import fs from "node:fs";
import path from "node:path";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const mods = process.env.ZT_NPM_DIR || path.join(root, ".deps/npm/node_modules");
const { getLlama, LlamaLogLevel } = await import(path.join(mods, "node-llama-cpp/dist/index.js"));

const jobs = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const llama = await getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                               progressLogs: false, logLevel: LlamaLogLevel.error, maxThreads: 1 });
for (const job of jobs) {
  const model = await llama.loadModel({ modelPath: job.gguf, gpuLayers: 0 });
  const tok = model.fileInfo.metadata.tokenizer;
  if (job.probs) {
    const { ids, positions, out, lora } = job.probs;
    const nv = tok.ggml.tokens.length;
    const context = await model.createContext({ contextSize: ids.length + 64, batchSize: ids.length + 64,
                                                flashAttention: false, experimentalKvCacheKeyType: "F32",
                                                experimentalKvCacheValueType: "F32", threads: 1,
                                                ...(lora ? { lora: { adapters: [{ filePath: lora, scale: 1 }] } } : {}) });
    const want = new Set(positions);
    const opts = { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 1 };
    const res = await context.getSequence().controlledEvaluate(
      ids.map((t, i) => (want.has(i) ? [t, { generateNext: { probabilities: true, options: opts } }] : t)));
    const buf = new Float32Array(positions.length * nv);
    positions.forEach((t, k) => { for (const [id, p] of res[t].next.probabilities) buf[k * nv + id] = p; });
    fs.writeFileSync(out, Buffer.from(buf.buffer));
    await context.dispose();
  }
  for (const t of job.tokenize ?? [])
    fs.writeFileSync(t.out, JSON.stringify({ ids: model.tokenize(fs.readFileSync(t.text, "utf8"), false) }));
  if (job.template) {
    const r = new llama._bindings.AddonJinjaRenderer(tok.chat_template);
    const msgs = JSON.parse(fs.readFileSync(job.template.messages, "utf8"));
    fs.writeFileSync(job.template.out, r.render({ messages: msgs, add_generation_prompt: true,
                                                  bos_token: tok.ggml.tokens[tok.ggml.bos_token_id],
                                                  eos_token: tok.ggml.tokens[tok.ggml.eos_token_id] }));
  }
  await model.dispose();
}
await llama.dispose();
