// chat_templates.js - the reference side of tests/chat_templates.sh: renders chat templates with
// the npm package @huggingface/jinja (what transformers.js uses), one process for many cases.
//
//   node tests/chat_templates.js PKG_DIR CASES.json OUT_DIR
//
// CASES.json: [{"id", "template": path, "messages": path, "agp": bool, "bos", "eos"}]; a messages
// file is an array, or an object whose "messages" is one and whose other keys are variables
// (tools, ...), given before messages/bos_token/eos_token/add_generation_prompt. For each,
// OUT_DIR/<id>.out gets the rendered text byte for byte, or OUT_DIR/<id>.err the error message.
// A template path ending in .json is a tokenizer_config.json (its chat_template, bos_token,
// eos_token, as zerotrain reads them); anything else is the template source. strftime_now sees
// the fixed instant $ZT_CHAT_NOW (unix seconds, UTC; the C side gets the same through --now).
"use strict";
const fs = require("fs");
const path = require("path");

const [pkgDir, casesPath, outDir] = process.argv.slice(2);
if (!pkgDir || !casesPath || !outDir) {
    console.error("usage: node chat_templates.js PKG_DIR CASES.json OUT_DIR");
    process.exit(2);
}
const now = Number(process.env.ZT_CHAT_NOW || "0");
if (now > 0) {
    const RealDate = Date;
    global.Date = class extends RealDate {
        constructor(...a) {
            if (a.length) super(...a);
            else super(now * 1000);
        }
        static now() { return now * 1000; }
    };
}
const { Template } = require(path.join(pkgDir, "dist", "index.cjs"));

function token(v) {
    if (typeof v === "string") return v;
    if (v && typeof v === "object" && typeof v.content === "string") return v.content;
    return "";
}

function load(p) {
    const src = fs.readFileSync(p, "utf8");
    if (p.endsWith(".json")) {
        const cfg = JSON.parse(src);
        let t = cfg.chat_template;
        if (Array.isArray(t)) t = t.find((e) => e.name === "default").template;
        return { source: t, bos: token(cfg.bos_token), eos: token(cfg.eos_token) };
    }
    return { source: src, bos: "", eos: "" };
}

const cache = new Map();
for (const c of JSON.parse(fs.readFileSync(casesPath, "utf8"))) {
    let out;
    try {
        if (!cache.has(c.template)) {
            const t = load(c.template);
            cache.set(c.template, { ...t, compiled: new Template(t.source) });
        }
        const t = cache.get(c.template);
        const doc = JSON.parse(fs.readFileSync(c.messages, "utf8"));
        const extra = Array.isArray(doc) ? {} : { ...doc };
        const msgs = Array.isArray(doc) ? doc : doc.messages;
        delete extra.messages;
        out = t.compiled.render({
            ...extra,
            messages: msgs,
            bos_token: c.bos !== undefined ? c.bos : t.bos,
            eos_token: c.eos !== undefined ? c.eos : t.eos,
            add_generation_prompt: !!c.agp,
        });
    } catch (e) {
        fs.writeFileSync(path.join(outDir, c.id + ".err"), String(e && e.message ? e.message : e));
        continue;
    }
    fs.writeFileSync(path.join(outDir, c.id + ".out"), out);
}
