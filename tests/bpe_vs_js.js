// bpe_vs_js.js - the JavaScript half of tests/bpe_vs_js.sh: checks zerotrain's C GPT-2 BPE
// (src/data/bpe.c) token for token against the npm package gpt-3-encoder@1.1.4 running in node.
//
//   node bpe_vs_js.js tables                    print the Unicode class tables as src/data/bpe_unicode.h embeds them
//   node bpe_vs_js.js hard OUT                  write the "hard" test text (UTF-8 plus invalid bytes)
//   node bpe_vs_js.js compare --pkg DIR --bin F [--val F2 --val-fraction f] TEXT...
//                                               encode each TEXT with the package, as documents
//                                               preceded by <|endoftext|>, and compare with the
//                                               tokens in F (then F2) written by `zerotrain tokenize`;
//                                               F2 must hold the last floor(f * total) tokens
// Exit status: 0 identical, 1 mismatch, 2 usage or setup problem.
'use strict';
const fs = require('fs');
const path = require('path');

const EOT = 50256;

// ---------------------------------------------------------------------------------------------
// Unicode tables. The package's pre-tokenizer regex uses \p{L}, \p{N} and \s as *this* node's
// regex engine defines them; bpe_unicode.h embeds the same sets as explicit code point ranges (PCRE2 has
// its own, older, Unicode version). `tables` prints them in bpe_unicode.h's exact text form so the shell
// test can diff the two.

function classRanges(re) {
    const out = [];
    let start = -1;
    for (let c = 0; c <= 0x110000; c++) {
        const inside = c < 0x110000 && !(c >= 0xd800 && c <= 0xdfff) &&
                       re.test(String.fromCodePoint(c));
        if (inside && start < 0) start = c;
        if (!inside && start >= 0) {
            out.push([start, c - 1]);
            start = -1;
        }
    }
    return out;
}

function hex(c) { return '0x' + c.toString(16).padStart(6, '0'); }

function tableText() {
    const lines = [];
    const emit = (name, ranges) => {
        lines.push(`static const uint32_t ${name}[][2] = {`);
        for (let i = 0; i < ranges.length; i += 4) {
            lines.push('    ' + ranges.slice(i, i + 4).map(r => `{${hex(r[0])}, ${hex(r[1])}}`).join(', ') + ',');
        }
        lines.push('};');
    };
    emit('zt_bpe_letter_ranges', classRanges(/^\p{L}$/u));
    emit('zt_bpe_number_ranges', classRanges(/^\p{N}$/u));
    emit('zt_bpe_space_ranges', classRanges(/^\s$/u));
    return lines.join('\n') + '\n';
}

// ---------------------------------------------------------------------------------------------
// The hard text: everything the KJV lacks. Deterministic (fixed PRNG seed).

function hardText() {
    let seed = 20240520;
    const rnd = n => {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
        return (seed >>> 8) % n;
    };
    const parts = [];
    parts.push(
        "Hello world. Héllo wörld! Café naïve résumé façade coöperate Ångström Øresund.\n",
        "It's John's; they're here, we've gone, I'm in, you'll see, he'd say. IT'S 'S 'LL 'D\n",
        "'s'll'd're've'm't ''s '''ll x's'  's\t's\n's\n",
        "Numbers: 0 1 12 123 1234 12345 123456 3.14159 -42 +7 1,000,000 0x1F 1e-9 ٣٤٥ ١٢ ½ ⅓ Ⅻ ² ³ ①\n",
        "Ελληνικά κείμενα, Русский текст, Українська мова, Հայերեն, ქართული.\n",
        "日本語のテキストと漢字、中文文本。한국어 텍스트입니다。ＡＢＣ１２３ｱｲｳ\n",
        "العربية עברית हिन्दी বাংলা தமிழ் ภาษาไทย ພາສາລາວ မြန်မာ ☃ ★ ♥ ∑ ∫ ≠ ≤ → ⇒ ∞\n",
        "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ 🏳️‍🌈 🤖🦀 x😀y 1😀2\n",
        "Tabs\tand\t\ttabs\t \t mixed   spaces     runs          here\t\n",
        "trailing spaces   \n   leading spaces\n\n\nblank lines\n\n\n\n  \n \n\t\n",
        "Windows\r\nline\r\nendings\r\n\r\nand\rbare\rCR\n",
        "Unicode spaces:\u00a0nbsp\u2003em\u3000ideo\ufeffbom\u2028ls\u2029ps\u202fnnb\u205fmm\u1680og\u000bvt\u000cff\n",
        "Not spaces in JS: \u0085nel\u200bzwsp\u180emvs\u2060wj and NUL\u0000here \u0001\u007f\n",
        "<|endoftext|> is plain text here, not the special token <|endoftext|>\n",
        "Commas: \",,\" },,\" ],,\" ),,\" \"],,\" ],,[ ',,\" .\",,\" ',,' x,,\" .,,\" a,b,,c ,,,, ,,\n",
        "Code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; } // done\n",
        "    def f(self, x):\n        return {'a': [1, 2], \"b\": None}\n",
        "URLs: https://example.com/path?q=1&r=two#frag mail@example.org\n",
        "Punctuation runs: !!! ??? ... --- *** ### $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} ||| ~~~ ``` \n",
        "Combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 \u0915\u094d\u0937 Zalgo: Z\u0351\u0346\u036ba\u0350l\u0352g\u0357o\n",
        "Ligatures ﬁ ﬂ ß ẞ ŉ ǅ ǈ Dž ℌ ℕ ℝ 𝔸 𝕏 𝒜 Mathematical 𝟘𝟙𝟚\n",
        "Long word: " + "a".repeat(3000) + "\n",
        "Long number: " + "9".repeat(2000) + "\n",
        "Long spaces:" + " ".repeat(1500) + "x\n",
        "Long tabs:" + "\t".repeat(700) + "\n",
        "Long punct: " + "=-".repeat(800) + "\n",
        "Long CJK: " + "漢字仮名交じり文".repeat(150) + "\n",
        "Long emoji: " + "😀🎉".repeat(300) + "\n");
    // Class boundaries: the first and last code point of every \p{L}, \p{N} and \s range, and
    // their neighbours, between letters, digits and spaces.
    const seen = new Set();
    let line = [];
    for (const re of [/^\p{L}$/u, /^\p{N}$/u, /^\s$/u]) {
        for (const [s, e] of classRanges(re)) {
            for (const c of [s - 1, s, e, e + 1]) {
                if (c < 0x20 || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff) || seen.has(c)) continue;
                seen.add(c);
                const ch = String.fromCodePoint(c);
                line.push(['a' + ch + 'b', '1' + ch + '2', ' ' + ch + ' ', ch + ch, '\'' + ch][c % 5]);
                if (line.length === 24) {
                    parts.push('b' + line.join('') + '.\n');
                    line = [];
                }
            }
        }
    }
    parts.push('b' + line.join('') + '.\n');
    // Random text from a mixed alphabet.
    const alphabet = [
        'the', 'The', ' of', ' and', 'ing', 'tion', ' a', 'x', 'Q', 'z', 'é', 'ß', 'ø', 'λ', 'Ж',
        '中', '文', 'の', '한', '😀', '👍🏽', '‍', '\u0301', '0', '7', '42', '٣', '½', ' ', ' ', ' ',
        '  ', '\t', '\n', '\r\n', '\u00a0', '\u3000', '\u0085', '\'', '\'s', '\'ll', '\'d', '\'t',
        ',', ',,', '.', '!', '?', '"', '(', ')', '-', '_', '/', '\\', '<|', '|>', '#', '@', '…',
        '—', '“', '”', '·'];
    for (let i = 0; i < 60000; i++) parts.push(alphabet[rnd(alphabet.length)]);
    parts.push('\nThe end.\n');
    const utf8 = Buffer.from(parts.join(''), 'utf8');
    // Invalid UTF-8: node's readFileSync(path, 'utf8') turns each maximal invalid subpart into
    // U+FFFD; bpe.c must do the same.
    const invalid = Buffer.from([
        0x0a, 0x42, 0x61, 0x64, 0x3a, 0x20, 0xff, 0x20, 0xc0, 0xaf, 0x20, 0xe0, 0x80, 0x80, 0x20,
        0xed, 0xa0, 0x80, 0x20, 0xf4, 0x90, 0x80, 0x80, 0x20, 0xe2, 0x82, 0x0a, 0xf0, 0x9f, 0x98,
        0x41, 0x80, 0xbf, 0x62, 0xc3, 0x28, 0xf8, 0x88, 0x80, 0x80, 0x80, 0x63, 0xfe, 0xfe, 0xff,
        0xff, 0x20, 0xef, 0xbf, 0xbd, 0x20, 0xf0, 0x9f, 0x98, 0x80, 0xe2, 0x0a, 0x64, 0x2e, 0x0a]);
    const tail = Buffer.from('After the bad bytes, ordinary text again.\n', 'utf8');
    return Buffer.concat([utf8, invalid, tail, Buffer.from([0xf0, 0x9f])]);
}

// ---------------------------------------------------------------------------------------------
// Chunked encoding. The package's encode() is O(n^2) in the number of tokens (it grows its result
// with Array.concat once per pre-token), so a 4 MB text cannot go through one call. We cut the
// text just after a "\n" whose preceding and following characters are both non-whitespace, and
// encode the pieces separately. That cannot change the result:
//   - The regex /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu has
//     no lookbehind and no anchors, so a match starting at position p depends only on text[p..].
//     Its one lookahead, (?!\S), and greedy runs look at most one character past the match end.
//   - The character before the "\n" is non-whitespace, and no alternative matches a
//     non-whitespace character followed by a "\n" (only the \s+ alternatives take "\n", and they
//     take nothing else; the optional prefix of the others is a literal space). So the match
//     covering that character ends exactly at the "\n", in the whole text and in the piece alike,
//     and it looked ahead only as far as the "\n", which both have.
//   - At the "\n": in the whole text the next character is non-whitespace, so \s+(?!\S) fails
//     and \s+ matches the lone "\n"; at the end of the piece \s+(?!\S) matches the lone "\n".
//     Same match, ending at the cut.
//   - The next match starts at the cut, in the whole text and in the next piece alike, and from
//     there on the text is identical.
// bpe() is a pure function of each match (its cache only memoizes), so the tokens of the whole
// are the concatenation of the tokens of the pieces.
const WS = /^\s$/u;

function encodeChunked(encode, text, minChunk) {
    const out = [];
    let start = 0;
    const flush = end => {
        const toks = encode(text.slice(start, end));
        for (const t of toks) out.push(t);
        start = end;
    };
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) {
        if (i + 1 - start < minChunk || i === 0 || i + 1 >= text.length) continue;
        if (!WS.test(text[i - 1]) && !WS.test(text[i + 1])) flush(i + 1);
    }
    if (start < text.length) flush(text.length);
    return out;
}

function readTokenFile(file) {
    const buf = fs.readFileSync(file);
    if (buf.length < 1024) throw new Error(`${file}: shorter than the 1024-byte header`);
    const magic = buf.readInt32LE(0), version = buf.readInt32LE(4), n = buf.readInt32LE(8);
    if (magic !== 20240520 || version !== 1) throw new Error(`${file}: bad magic/version ${magic}/${version}`);
    if (buf.length !== 1024 + 2 * n) throw new Error(`${file}: header says ${n} tokens, file has ${buf.length} bytes`);
    const toks = new Array(n);
    for (let i = 0; i < n; i++) toks[i] = buf.readUInt16LE(1024 + 2 * i);
    return toks;
}

function compare(args) {
    let pkg = process.env.ZT_BPE_DIR || '', bin = '', val = '', fraction = -1;
    const texts = [];
    for (let i = 0; i < args.length; i++) {
        if (args[i] === '--pkg') pkg = args[++i];
        else if (args[i] === '--bin') bin = args[++i];
        else if (args[i] === '--val') val = args[++i];
        else if (args[i] === '--val-fraction') fraction = Number(args[++i]);
        else texts.push(args[i]);
    }
    if (!pkg || !bin || texts.length === 0) {
        console.error('usage: bpe_vs_js.js compare --pkg DIR --bin F [--val F2 --val-fraction f] TEXT...');
        return 2;
    }
    const { encode, decode } = require(path.resolve(pkg));
    const t0 = Date.now();
    const expected = [];
    let chars = 0;
    for (const file of texts) {
        const text = fs.readFileSync(file, 'utf8');
        chars += text.length;
        expected.push(EOT);
        for (const t of encodeChunked(encode, text, 256)) expected.push(t);
    }
    const secs = (Date.now() - t0) / 1000;
    let got = readTokenFile(bin);
    if (val) {
        const v = readTokenFile(val);
        const want = Math.floor(fraction * (got.length + v.length));
        if (fraction >= 0 && v.length !== want) {
            console.error(`MISMATCH: ${val} has ${v.length} tokens, expected floor(${fraction} * ${got.length + v.length}) = ${want}`);
            return 1;
        }
        got = got.concat(v);
    }
    const n = Math.min(expected.length, got.length);
    let i = 0;
    while (i < n && expected[i] === got[i]) i++;
    if (i === n && expected.length === got.length) {
        console.log(`identical: ${got.length} tokens (${texts.join(', ')}); node encode took ${secs.toFixed(1)} s`);
        return 0;
    }
    const lo = Math.max(0, i - 8), hi = i + 8;
    const show = toks => toks.slice(lo, hi).map(t => (t === undefined ? 'undef' : t)).join(' ');
    const ctx = toks => JSON.stringify(decode(toks.slice(lo, hi).filter(t => typeof t === 'number' && t < 50257)));
    console.error(`MISMATCH at token ${i} (JS has ${expected.length} tokens, C has ${got.length}):`);
    console.error(`  JS [${lo}..${hi}): ${show(expected)}   ${ctx(expected)}`);
    console.error(`  C  [${lo}..${hi}): ${show(got)}   ${ctx(got)}`);
    return 1;
}

function main() {
    const [mode, ...args] = process.argv.slice(2);
    if (mode === 'tables') {
        process.stdout.write(tableText());
        return 0;
    }
    if (mode === 'hard' && args.length === 1) {
        fs.writeFileSync(args[0], hardText());
        return 0;
    }
    if (mode === 'compare') return compare(args);
    console.error('usage: bpe_vs_js.js tables | hard OUT | compare --pkg DIR --bin F [--val F2 --val-fraction f] TEXT...');
    return 2;
}

process.exitCode = main();
