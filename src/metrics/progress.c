/* progress.c - the training progress display: on a terminal one line redrawn in place with a bar,
 * step/total, loss, lr, grad norm, tok/s, MFU, memory and ETA; when stdout is not a terminal (CI, a log
 * file) one plain line per reported step. */
#include "metrics/metrics.h"
#include "core/env.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void zt_format_duration(char *buf, size_t cap, double s) {
    if (!isfinite(s) || s < 0) {
        snprintf(buf, cap, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, cap, "%lds", t);
}

void zt_progress_init(zt_progress *p, FILE *out) {
    p->out = out;
    /* ZT_STDOUT_TTY: set by the launcher, since under mpirun stdout is a pty either way */
    const char *t = zt_env(ZT_ENV_STDOUT_TTY);
    p->tty = t ? strcmp(t, "1") == 0 : isatty(fileno(out));
    if (zt_env(ZT_ENV_NO_TTY)) p->tty = false;
    p->width = 100;
    struct winsize ws;
    if (p->tty && ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 40) p->width = ws.ws_col;
}

static void mfu_text(char *buf, size_t cap, double mfu) {
    if (isfinite(mfu)) snprintf(buf, cap, "%.1f%%", 100.0 * mfu);
    else snprintf(buf, cap, "n/a");
}

/* " | mem 123 MiB": the process's peak resident set, else the engine's planned high-water;
 * "" when the step carries no memory report. */
static void mem_text(char *buf, size_t cap, const zt_step_metrics *m, const char *sep) {
    uint64_t b = !m->has_memory ? 0 : m->rss_peak ? m->rss_peak : zt_memory_peak_total(&m->mem);
    if (!b) snprintf(buf, cap, "%s", "");
    else if (b >= (10ull << 30)) snprintf(buf, cap, "%smem %.1f GiB", sep, (double)b / 1073741824.0);
    else snprintf(buf, cap, "%smem %.0f MiB", sep, (double)b / 1048576.0);
}

void zt_progress_step(zt_progress *p, const zt_step_metrics *m) {
    char eta[32], mfu[32], mem[48];
    double per_step = m->elapsed_s / (double)m->step;
    zt_format_duration(eta, sizeof eta, per_step * (double)(m->total_steps - m->step));
    mfu_text(mfu, sizeof mfu, m->mfu);
    char moe[64] = ""; /* a mixture of experts: the busiest expert over the mean, the drops if any */
    if (m->has_moe && m->moe.dropped)
        snprintf(moe, sizeof moe, " | experts max/mean %.2f dropped %lld", m->moe.max_over_mean,
                 (long long)m->moe.dropped);
    else if (m->has_moe)
        snprintf(moe, sizeof moe, " | experts max/mean %.2f", m->moe.max_over_mean);
    if (!p->tty) {
        mem_text(mem, sizeof mem, m, " | ");
        fprintf(p->out,
                "step %6lld/%lld | loss %.4f | lr %.3e | norm %.3f | %.0f tok/s | mfu %s | %.0f ms%s%s | eta %s\n",
                (long long)m->step, (long long)m->total_steps, m->loss, m->lr, m->grad_norm,
                m->tok_per_s, mfu, 1e3 * m->step_s, mem, moe, eta);
        fflush(p->out);
        return;
    }
    char text[256];
    mem_text(mem, sizeof mem, m, " ");
    int n = snprintf(text, sizeof text, " %lld/%lld loss %.4f lr %.2e norm %.2f %.0f tok/s mfu %s%s eta %s",
                     (long long)m->step, (long long)m->total_steps, m->loss, m->lr, m->grad_norm,
                     m->tok_per_s, mfu, mem, eta);
    int bar = p->width - n - 3;
    if (bar > 40) bar = 40;
    fputs("\r[", p->out);
    if (bar > 0) {
        int fill = (int)((double)bar * (double)m->step / (double)m->total_steps);
        for (int i = 0; i < bar; i++) fputc(i < fill ? '#' : '.', p->out);
    }
    fputc(']', p->out);
    fputs(text, p->out);
    fputs("\033[K", p->out);
    fflush(p->out);
}

void zt_progress_message(zt_progress *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (p->tty) fputs("\r\033[K", p->out);
    vfprintf(p->out, fmt, ap);
    fputc('\n', p->out);
    va_end(ap);
    fflush(p->out);
}

void zt_progress_finish(zt_progress *p) {
    if (p->tty) fputc('\n', p->out);
    fflush(p->out);
}
