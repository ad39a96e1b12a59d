/* stop.c - the stop request (stop.h): async-signal-safe handlers that record which signal asked
 * to stop; the cross-rank decision is the trainer's (an all-reduced flag at the step boundary). */
#include "core/stop.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    if (g_stop && sig == SIGINT) { /* the second Ctrl-C: do not wait for the step boundary */
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
        return;
    }
    if (!g_stop) g_stop = sig;
}

void zt_stop_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

int zt_stop_requested(void) { return g_stop; }

const char *zt_signal_name(int sig) {
    static const char *const names[] = {
        [SIGHUP] = "SIGHUP",   [SIGINT] = "SIGINT",   [SIGQUIT] = "SIGQUIT", [SIGILL] = "SIGILL",
        [SIGTRAP] = "SIGTRAP", [SIGABRT] = "SIGABRT", [SIGBUS] = "SIGBUS",   [SIGFPE] = "SIGFPE",
        [SIGKILL] = "SIGKILL", [SIGUSR1] = "SIGUSR1", [SIGSEGV] = "SIGSEGV", [SIGUSR2] = "SIGUSR2",
        [SIGPIPE] = "SIGPIPE", [SIGALRM] = "SIGALRM", [SIGTERM] = "SIGTERM", [SIGXCPU] = "SIGXCPU",
        [SIGXFSZ] = "SIGXFSZ",
    };
    static _Thread_local char buf[24];
    if (sig > 0 && sig < (int)(sizeof names / sizeof *names) && names[sig]) return names[sig];
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}
