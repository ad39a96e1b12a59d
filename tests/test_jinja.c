/* test_jinja.c - the Jinja interpreter (src/data/jinja_*.c): expressions, filters, tests, methods,
 * whitespace control, loops, macros, namespaces and call blocks rendered exactly as the npm package
 * @huggingface/jinja 0.5.11 renders them (the expected strings below were produced by the package
 * in node; tests/chat_templates.sh compares whole templates), and every bad input refused with
 * ZT_ERR_DATA naming the template, the line and the column: unclosed tags and blocks, unknown
 * tags, filters and tests, bad expressions, calls of what is not a function, raise_exception's
 * text, runaway recursion and loops, truncated sources. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/chat_template.h"
#include "data/jinja.h"

/* Renders src with the JSON vars; returns the status, *out the text (or NULL). */
static int render(const char *src, const char *vars_json, char **out, zt_error *err) {
    zt_jinja *t = NULL;
    *out = NULL;
    memset(err, 0, sizeof *err);
    int rc = zt_jinja_parse(&t, src, strlen(src), "t.jinja", err);
    if (rc) {
        assert_null(t);
        return rc;
    }
    cJSON *vars = cJSON_Parse(vars_json ? vars_json : "{}");
    assert_non_null(vars);
    size_t len = 0;
    rc = zt_jinja_render(t, vars, out, &len, err);
    if (!rc) assert_int_equal(len, strlen(*out));
    else assert_null(*out);
    cJSON_Delete(vars);
    zt_jinja_free(t);
    return rc;
}

static void expect_text(const char *src, const char *vars, const char *want) {
    char *out;
    zt_error err;
    int rc = render(src, vars, &out, &err);
    if (rc) fail_msg("rendering %s failed: %s", src, err.msg);
    if (strcmp(out, want)) fail_msg("rendering %s\n  got  \"%s\"\n  want \"%s\"", src, out, want);
    free(out);
}

/* A failure with ZT_ERR_DATA whose message holds each of the NULL-terminated substrings. */
static void expect_error(const char *src, const char *vars, ...) {
    char *out;
    zt_error err;
    int rc = render(src, vars, &out, &err);
    if (rc != ZT_ERR_DATA) fail_msg("%s: expected ZT_ERR_DATA, got %d (%s) \"%s\"", src, rc, err.msg, out ? out : "");
    va_list ap;
    va_start(ap, vars);
    for (const char *want; (want = va_arg(ap, const char *));)
        if (!strstr(err.msg, want)) fail_msg("%s: the message \"%s\" lacks \"%s\"", src, err.msg, want);
    va_end(ap);
}

/* ---------------------------------------------------------------------------------------------
 * Renderings identical to @huggingface/jinja 0.5.11. */

static const struct {
    const char *src, *vars, *want;
} REFERENCE[] = {
    {"{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 2 ** 3 ** 2 }}|{{ 10 / 4 }}|{{ 1.5 + 1 }}|{{ 3.0 }}",
     "{}",
     "7|9|3|-4|1|-1|64|2.5|2.5|3.0"},
    {"{{ x.y.z }}|{{ x is defined }}|{{ x is undefined }}|{{ none is none }}|{{ 1 is number }}|{{ 'a' is string }}|{{ {} is mapping }}|{{ [] is iterable }}|{{ 3 is odd }}|{{ 4 is even }}|{{ true is boolean }}",
     "{}",
     "|false|true|true|true|true|true|true|true|true|true"},
    {"{{ [1,2,3][1:] }}|{{ [1,2,3][::-1] }}|{{ 'hello'[1:3] }}|{{ 'hello'[-1] }}|{{ [1,2,3][-1] }}",
     "{}",
     "[2, 3]|[3, 2, 1]|el|o|3"},
    {"{% for i in range(3) %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {% endfor %}",
     "{}",
     "1/0/3/true/false/3 2/1/2/false/false/3 3/2/1/false/true/3 "},
    {"{% for i in [] %}x{% else %}empty{% endfor %}|{% for i in range(5) if i is odd %}{{ i }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
     "{\"d\": {\"b\": 1, \"a\": 2}}",
     "empty|13|b=1;a=2;"},
    {"{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for i in range(5) %}{% if i is even %}{% continue %}{% endif %}{{ i }}{% endfor %}",
     "{}",
     "012|13"},
    {"{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}",
     "{}",
     "6 0123"},
    {"{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', greeting='Hi') }} {{ greet('Cy', 'Yo') }}",
     "{}",
     "Hello, Ann! Hi, Bob! Yo, Cy!"},
    {"{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside{% endcall %}",
     "{}",
     "[inside]"},
    {"{{ '  padded  ' | trim }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello world' | title }}|{{ 'hello World' | capitalize }}|{{ [3,1,2] | sort | join(',') }}|{{ [1,2,3] | length }}|{{ [1,2,3] | first }}|{{ [1,2,3] | last }}|{{ [1,2,2,3] | unique | list }}|{{ [1,2,3] | reverse | list }}",
     "{}",
     "padded|ABC|abc|Hello World|Hello World|1,2,3|3|1|3|[1, 2, 3]|[3, 2, 1]"},
    {"{{ x | default('dflt') }}|{{ '' | default('e', true) }}|{{ 'A-B-C'.split('-') }}|{{ 'a b  c'.split() }}|{{ 'xyx'.replace('x', 'z') }}|{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ ' s '.strip() }}|{{ 'line1\nline2' | indent(2) }}",
     "{}",
     "dflt|e|[\"A\", \"B\", \"C\"]|[\"a\", \"b\", \"c\"]|zyz|true|true|s|line1\n  line2"},
    {"{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ '\303\251\"\n' | tojson }}|{{ [1, 2.5, none, true] | tojson }}",
     "{\"d\": {\"a\": [1, {\"b\": null}], \"c\": \"x\"}}",
     "{\"a\": [1, {\"b\": null}], \"c\": \"x\"}|{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": \"x\"\n}|\"\303\251\\\"\\n\"|[1, 2.5, null, true]"},
    {"{{ users | selectattr('active') | map(attribute='name') | join(', ') }}|{{ users | rejectattr('active') | map(attribute='name') | list }}|{{ users | selectattr('name', 'equalto', 'bo') | list | length }}",
     "{\"users\": [{\"name\": \"al\", \"active\": true}, {\"name\": \"bo\", \"active\": false}, {\"name\": \"cy\", \"active\": true}]}",
     "al, cy|[\"bo\"]|1"},
    {"{{ 'yes' if 1 > 2 else 'no' }}|{{ 1 in [1, 2] }}|{{ 3 not in [1, 2] }}|{{ 'a' in 'abc' }}|{{ 'k' in {'k': 1} }}|{{ not true }}|{{ true and 0 }}|{{ 0 or 'x' }}|{{ 1 == 1.0 }}|{{ '1' == 1 }}|{{ none == x }}",
     "{}",
     "no|true|true|true|true|false|0|x|true|true|true"},
    {"{{ 12 | string }}|{{ '42' | int + 1 }}|{{ '3.5' | float }}|{{ 3.7 | int }}|{{ -3 | abs }}|{{ d | length }}|{{ d.get('a') }}|{{ d.get('z', 'none') }}|{{ d.keys() | list }}|{{ d['a'] }}",
     "{\"d\": {\"a\": 1, \"b\": 2}}",
     "12|43|3.5|3|3|2|1|none|[\"a\", \"b\"]|1"},
    {"{%- if true -%}\n  a\n{%- endif -%}\n  b  {{- ' c ' -}}  d\n{# comment #}\ne",
     "{}",
     "ab c d\ne"},
    {"  {% if true %}\n    x\n  {% endif %}\ny\n",
     "{}",
     "    x\ny"},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set s %}block{{ a }}{% endset %}[{{ s }}]",
     "{}",
     "12[block1]"},
    {"{% filter upper %}shout {{ 'it' }}{% endfilter %}",
     "{}",
     "SHOUT IT"},
    {"{{ 1 if false }}{{ [1, [2, 3], {'a': 'b'}] }}{{ {'a': 1} }}{{ (1, 2) | length }}",
     "{}",
     "[1, [2, 3], {\"a\": \"b\"}]{\"a\": 1}2"},
    {"a{% generation %}GEN{% endgeneration %}b {%- generation -%} c {%- endgeneration %} d",
     "{}",
     "aGENbc d"},
    {"{{ messages | map(attribute='role') | list | tojson }}{{ messages[0].content | length }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"h\\u00e9llo\\ud83d\\ude00\"}]}",
     "[\"user\"]7"},
    {"{{ 0.1 + 0.2 }}|{{ 1 / 3 }}|{{ 100000000000000000000.0 * 100 }}|{{ 100000000000000000000.0 }}|{{ 2 ** 0.5 }}|{{ 5 / 0 }}|{{ -0.0 }}|{{ 0.000001 }}|{{ 0.0000001 * 1 }}|{{ 123456789012 * 1000 }}",
     "{}",
     "0.30000000000000004|0.3333333333333333|1e+22|100000000000000000000.0|1.4142135623730951|Infinity|-0.0|0.000001|1e-7|123456789012000"},
    {"{{ 'a,b,c'.split(',', 1) }}|{{ ' a  b '.split(none, 1) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'ab'.replace('', '-') }}",
     "{}",
     "[\"a\", \"b,c\"]|[\"a\", \"b \"]|bba|-a-b-"},
    {"{% set x = [1,2] %}{{ x[5] }}|{{ x.length }}|{{ 'abc'.length }}|{{ x.foo }}",
     "{}",
     "|2|3|"},
    {"{{ '\303\251' | upper }}{{ '\303\200B' | lower }}",
     "{}",
     "\303\211\303\240b"},
    {"{{ d | tojson(sort_keys=true) }}{{ '\303\251\360\237\230\200' | tojson(ensure_ascii=true) }}{{ d | tojson(separators=(',', ':')) }}",
     "{\"d\": {\"b\": [1, 2], \"a\": {\"x\": 1.5}}}",
     "{\"a\": {\"x\": 1.5}, \"b\": [1, 2]}\"\\u00e9\\ud83d\\ude00\"{\"b\":[1,2],\"a\":{\"x\":1.5}}"},
};

static void test_reference_renderings(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof REFERENCE / sizeof *REFERENCE; i++)
        expect_text(REFERENCE[i].src, REFERENCE[i].vars, REFERENCE[i].want);
}

static void test_whitespace_control(void **state) {
    (void)state;
    /* trim_blocks + lstrip_blocks, as transformers sets them */
    expect_text("{% if true %}\nA\n{% endif %}\nB", NULL, "A\nB");
    expect_text("  {% if true %}x{% endif %}", NULL, "x");
    expect_text("  {{ 'x' }}", NULL, "  x");
    expect_text("a  {{- 'b' -}}  c", NULL, "abc");
    expect_text("a\n  {%- if true %}b{% endif %}", NULL, "ab");
    expect_text("a {#- note -#} b", NULL, "ab");
    expect_text("a {# note #} b", NULL, "a  b");
    expect_text("x\n", NULL, "x");     /* one trailing newline dropped */
    expect_text("x\n\n", NULL, "x\n"); /* only one */
    expect_text("{{ 'a' }}\n{{ 'b' }}", NULL, "a\nb");
    expect_text("{% generation %}G{% endgeneration %}", NULL, "G");
}

static void test_loops(void **state) {
    (void)state;
    expect_text("{% for m in ms %}{{ loop.index }}{{ m }}{% if not loop.last %},{% endif %}{% endfor %}",
                "{\"ms\": [\"a\", \"b\", \"c\"]}", "1a,2b,3c");
    expect_text("{% for x in xs %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }} {% endfor %}", "{\"xs\": [1, 2, 3]}",
                "<1>2 1<2>3 2<3> ");
    expect_text("{% for k in d %}{{ k }}{% endfor %}", "{\"d\": {\"z\": 1, \"a\": 2}}", "za");
    expect_text("{% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}:{{ x }} {% endfor %}", NULL, "1:2 2:3 ");
    expect_text("{% for x in [] %}{% else %}none{% endfor %}", NULL, "none");
    /* an iteration cut by continue does not count: every one skipped renders the else block */
    expect_text("{% for x in [1, 2] %}{% continue %}{% else %}else{% endfor %}", NULL, "else");
    /* the loop has its own scope; if does not */
    expect_text("{% set a = 1 %}{% for x in [1] %}{% set a = 2 %}{% endfor %}{{ a }}", NULL, "1");
    expect_text("{% set a = 1 %}{% if true %}{% set a = 2 %}{% endif %}{{ a }}", NULL, "2");
    expect_text("{% for i in range(2) %}{% for j in range(2) %}{{ i }}{{ j }} {% endfor %}{% endfor %}", NULL, "00 01 10 11 ");
    expect_text("{{ range(5, 0, -2) | list }}", NULL, "[5, 3, 1]");
    expect_text("{{ [1, 2][::0] }}{{ 'ab'[::0] }}|", NULL, "[]|"); /* a zero step takes nothing */
}

static void test_macros_and_namespace(void **state) {
    (void)state;
    expect_text("{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{% endmacro %}{{ m('x') }}", NULL, "xx!");
    expect_text("{% macro m() %}{{ varargs | length }}{{ kwargs.k }}{% endmacro %}{{ m(1, 2, k=3) }}", NULL, "23");
    expect_text("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}",
                NULL, "120");
    expect_text("{% macro list(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}"
                "{% call(x) list([1, 2]) %}<{{ x }}>{% endcall %}", NULL, "<1><2>");
    expect_text("{% set ns = namespace(a=1) %}{% set ns.b = ns.a + 1 %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}", NULL,
                "12false");
    expect_text("{% set ns = namespace({'x': 5}) %}{{ ns.x }}", NULL, "5");
    expect_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, "t.jinja:1:", "takes not more than 1", NULL);
    expect_error("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", NULL, "no keyword argument 'b'", NULL);
    expect_error("{% set d = {} %}{% set d.x = 1 %}", NULL, "t.jinja:1:17", "non-namespace", NULL);
}

static void test_values_from_json(void **state) {
    (void)state;
    expect_text("{{ n }} {{ f }} {{ big }} {{ s }} {{ b }} {{ z is none }}",
                "{\"n\": 3, \"f\": 2.5, \"big\": 1e21, \"s\": \"x\", \"b\": false, \"z\": null}", "3 2.5 1e+21 x false true");
    expect_text("{{ d | tojson }}", "{\"d\": {\"b\": 1, \"10\": 2, \"2\": 3}}", "{\"2\": 3, \"10\": 2, \"b\": 1}");
    expect_text("{{ 1.0 }} {{ x }} {{ x * 2 }}", "{\"x\": 1.0}", "1.0 1 2");
    expect_text("{{ messages[0]['content'] }}", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", "hi");
    expect_error("{{ x }}", "{\"true\": 1}", "already declared", NULL);
}

static void test_extensions(void **state) {
    (void)state;
    expect_text("{{ [1, 2] | count }}{{ x | d('u') }}{{ '<a&b>' | e }}{{ 2.567 | round(2) }}{{ 'a b c' | wordcount }}", NULL,
                "2u&lt;a&amp;b&gt;2.573");
    expect_text("{{ [1, 2, 3, 4] | select('odd') | list }}{{ [1, 2, 3] | reject('odd') | list }}{{ 9 is divisibleby(3) }}", NULL,
                "[1, 3][2]true");
}

/* ---------------------------------------------------------------------------------------------
 * Bad templates: ZT_ERR_DATA naming the line and column. */

static void test_syntax_errors(void **state) {
    (void)state;
    expect_error("a\n{% if x %}never closed", NULL, "t.jinja:", "never closed", "endif", NULL);
    expect_error("{% for x in y %}\nbody", NULL, "endfor", NULL);
    expect_error("{% macro m() %}", NULL, "endmacro", NULL);
    expect_error("a\n  {% frobnicate %}", NULL, "t.jinja:2:6", "unknown statement 'frobnicate'", NULL);
    expect_error("{{ x ", NULL, "t.jinja:1:", "ends inside", NULL);
    expect_error("{{ 'abc }}", NULL, "t.jinja:1:4", "unterminated string", NULL);
    expect_error("{# comment", NULL, "t.jinja:1:1", "unclosed comment", NULL);
    expect_error("{{ 1 + }}", NULL, "t.jinja:1:8", NULL);
    expect_error("{{ (1 }}", NULL, "t.jinja:1:", "')'", NULL);
    expect_error("{{ [1, 2 }}", NULL, "t.jinja:1:", NULL);
    expect_error("{{ x | }}", NULL, "t.jinja:1:", NULL);
    expect_error("{{ x is 3 }}", NULL, "test name", NULL);
    expect_error("{{ a b }}", NULL, "t.jinja:1:6", "expected '}}'", NULL);
    expect_error("{% if %}{% endif %}", NULL, "t.jinja:1:7", NULL);
    expect_error("{% endif %}", NULL, "unknown statement 'endif'", NULL);
    expect_error("{% if x %}{% else %}{% else %}{% endif %}", NULL, "t.jinja:1:", NULL);
    expect_error("{{ 'a\\q' }}", NULL, "unknown escape", NULL);
    expect_error("{{ x $ y }}", NULL, "t.jinja:1:6", "unexpected character '$'", NULL);
    expect_error("{% set %}", NULL, "t.jinja:1:", NULL);
    expect_error("{% for 1 in x %}{% endfor %}", NULL, "loop variable", NULL);
    expect_error("{% macro m(a=1, b) %}{% endmacro %}", NULL, "non-default argument follows default argument", NULL);
    expect_error("{{ f(a=1, 2) }}", NULL, "positional arguments must come before keyword arguments", NULL);
    expect_error("line1\nline2 {{ x[] }}", NULL, "t.jinja:2:", NULL);
}

static void test_runtime_errors(void **state) {
    (void)state;
    expect_error("\n\n  {{ raise_exception('Conversation roles must alternate') }}", NULL, "t.jinja:3:",
                 "Conversation roles must alternate", NULL);
    expect_error("{{ nope() }}", NULL, "t.jinja:1:", "'nope' is not a function", NULL);
    expect_error("{{ 'x' | frobnicate }}", NULL, "t.jinja:1:10", "frobnicate", NULL);
    expect_error("{{ x | upper }}", NULL, "Cannot apply filter \"upper\" to type: UndefinedValue", NULL);
    expect_error("{{ 1 is frobnicated }}", NULL, "Unknown test: frobnicated", NULL);
    expect_error("{{ x + 1 }}", NULL, "undefined", NULL);
    expect_error("{{ none ~ 'a' }}", NULL, "null", NULL);
    expect_error("{{ 'a' - 1 }}", NULL, "Unknown operator \"-\" between StringValue and IntegerValue", NULL);
    expect_error("{% for x in 3 %}{% endfor %}", NULL, "Expected iterable", NULL);
    expect_error("{% set a, b = [1] %}", NULL, "Too few items to unpack", NULL);
    expect_error("{{ d[0] }}", "{\"d\": {}}", "non-string", NULL);
    expect_error("{% break %}", NULL, "outside a loop", NULL);
    expect_error("{{ {'a': 1} | tojson(indent='x') }}", NULL, "indent must be a number", NULL);
}

static void test_limits(void **state) {
    (void)state;
    /* unbounded recursion: refused, no stack overflow */
    expect_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", NULL, "nested deeper", NULL);
    /* huge loops: refused by the step bound or the range bound */
    expect_error("{% for i in range(100000000) %}{% endfor %}", NULL, "range()", NULL);
    expect_error("{% for i in range(10000) %}{% for j in range(10000) %}{{ i }}{% endfor %}{% endfor %}", NULL,
                 "t.jinja:1:", "runaway", NULL);
    /* a string that doubles until memory runs out */
    expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
                 "{% endfor %}{{ ns.s | length }}", NULL, "t.jinja:1:", NULL);
    /* deep nesting in the source */
    char deep[8192];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
    for (int i = 0; i < 2000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 2000; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    expect_error(deep, NULL, "nested deeper", NULL);
    k = 0;
    for (int i = 0; i < 700; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "{%% if 1 %%}"); /* 7000 bytes */
    expect_error(deep, NULL, "t.jinja:1:", NULL);
}

/* Every prefix of a real template either parses or fails with a message; none crashes. */
static void test_truncated_sources(void **state) {
    (void)state;
    const char *src =
        "{%- set ns = namespace(sys='') %}{% for m in messages %}{%- if m['role'] == 'system' -%}"
        "{% set ns.sys = m.content | trim %}{% elif m.role == \"user\" %}[INST] {{ ns.sys ~ m['content'] }} [/INST]"
        "{%- else %}{{ m.content + eos_token }}{# end #}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";
    size_t n = strlen(src);
    int ok = 0, refused = 0;
    for (size_t len = 0; len <= n; len++) {
        zt_jinja *t = NULL;
        zt_error err = {0};
        int rc = zt_jinja_parse(&t, src, len, "t.jinja", &err);
        if (rc == ZT_OK) {
            cJSON *vars = cJSON_Parse("{\"messages\": [{\"role\": \"system\", \"content\": \" s \"}, {\"role\": \"user\", "
                                      "\"content\": \"u\"}], \"eos_token\": \"</s>\", \"add_generation_prompt\": true}");
            char *out = NULL;
            size_t olen;
            zt_error e2 = {0};
            if (zt_jinja_render(t, vars, &out, &olen, &e2) != ZT_OK) assert_true(strlen(e2.msg) > 0);
            free(out);
            cJSON_Delete(vars);
            zt_jinja_free(t);
            ok++;
        } else {
            assert_int_equal(rc, ZT_ERR_DATA);
            assert_null(t);
            assert_non_null(strstr(err.msg, "t.jinja:"));
            refused++;
        }
    }
    assert_true(ok > 5 && refused > 50);
    char *out;
    zt_error err;
    expect_text(src, "{\"messages\": [{\"role\": \"system\", \"content\": \" sys \"}, {\"role\": \"user\", \"content\": \"hi\"}, "
                     "{\"role\": \"assistant\", \"content\": \"yo\"}], \"eos_token\": \"</s>\"}",
                "[INST] syshi [/INST]yo</s>");
    assert_int_equal(render("{{ 'x' }}", "[1]", &out, &err), ZT_ERR_DATA); /* vars not an object */
}

/* ---------------------------------------------------------------------------------------------
 * The chat template around the interpreter. */

static void test_chat_template_spans(void **state) {
    (void)state;
    char path[] = "/tmp/zt_test_jinja.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *cfg = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"}, {\"name\": \"default\", \"template\": "
                      "\"{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.role == 'assistant' %}{{ eos_token }}"
                      "{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}\"}], "
                      "\"bos_token\": {\"content\": \"<s>\"}, \"eos_token\": \"</s>\"}";
    FILE *f = fdopen(fd, "w");
    fputs(cfg, f);
    fclose(f);
    zt_chat_template *t;
    zt_error err = {0};
    assert_int_equal(zt_chat_template_load(&t, path, &err), ZT_OK);
    assert_string_equal(zt_chat_template_bos(t), "<s>");
    assert_string_equal(zt_chat_template_eos(t), "</s>");
    cJSON *msgs = cJSON_Parse("[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"hello\"}, "
                              "{\"role\": \"user\", \"content\": \"bye\"}, {\"role\": \"assistant\", \"content\": \"ciao\"}]");
    char *text;
    size_t len;
    zt_text_span *sp;
    int n;
    assert_int_equal(zt_chat_render_spans(t, msgs, &text, &len, &sp, &n, &err), ZT_OK);
    assert_string_equal(text, "<s><user>hi<assistant>hello</s><user>bye<assistant>ciao</s>");
    assert_int_equal(n, 2);
    assert_int_equal(sp[0].begin, strlen("<s><user>hi<assistant>"));
    assert_int_equal(sp[0].end, strlen("<s><user>hi<assistant>hello</s>"));
    assert_int_equal(sp[1].end, len);
    assert_memory_equal(text + sp[1].begin, "ciao</s>", 8);
    free(text);
    free(sp);
    /* a template whose prefix is not stable: the generation prompt differs from the turn's opening */
    f = fopen(path, "w");
    fputs("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[bot]{% endif %}", f);
    fclose(f);
    zt_chat_template_free(t);
    assert_int_equal(zt_chat_template_load(&t, path, &err), ZT_OK);
    assert_int_equal(zt_chat_render_spans(t, msgs, &text, &len, &sp, &n, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "message 1"));
    assert_non_null(strstr(err.msg, "not prefix-stable"));
    assert_null(text);
    zt_chat_template_free(t);
    /* a tokenizer_config.json without a chat_template */
    f = fopen(path, "w");
    fputs("{\"bos_token\": \"<s>\"}", f);
    fclose(f);
    assert_int_equal(zt_chat_template_load(&t, path, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "chat_template"));
    assert_int_equal(zt_chat_template_load(&t, "/nonexistent/x.jinja", &err), ZT_ERR_IO);
    cJSON_Delete(msgs);
    remove(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_renderings), cmocka_unit_test(test_whitespace_control),
        cmocka_unit_test(test_loops),                cmocka_unit_test(test_macros_and_namespace),
        cmocka_unit_test(test_values_from_json),     cmocka_unit_test(test_extensions),
        cmocka_unit_test(test_syntax_errors),        cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_limits),               cmocka_unit_test(test_truncated_sources),
        cmocka_unit_test(test_chat_template_spans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
