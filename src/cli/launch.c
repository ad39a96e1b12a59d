/* launch.c - the embedded launcher: `zerotrain train CONFIG --nproc N` on one machine runs itself
 * as N local ranks under Open MPI's mpirun (the user never types mpirun), passing the arguments
 * through unchanged, and supervises the job (docs/reliability.md):
 *   - SIGTERM/SIGINT to the launcher are forwarded to every rank (each rank registers its pid in
 *     the job's run directory, $ZT_RUN_DIR); the ranks save at the next step boundary and exit 75.
 *     After fault.grace_s seconds without the job ending, the ranks are killed.
 *   - A rank that dies (a signal, or an exit code that is not one of zerotrain's) ends the job with
 *     exit 5 and one line naming the rank and how it died; mpirun stops the others (SIGTERM, then
 *     SIGKILL 1 s later). A rank that failed with one of zerotrain's codes (it printed its own
 *     error) gives the job that code.
 *   - With --max-restarts N, a job that ended with exit 5 (a rank lost, a deadline) is started
 *     again, up to N times, resuming from the checkpoint directory's newest commit (torchrun's
 *     restart, with the state recovery done here); $ZT_RESTART_ATTEMPT tells the ranks which try.
 *     With --min-nproc M < N, a rank that failed in two attempts in a row is taken as lost for
 *     good: the job continues on the largest world in [M, N) that divides the global batch's
 *     micro-batches, with the gradient accumulation raised so the global batch is unchanged (the
 *     loader reshards the commit; the continuation is bit-identical where the reduction trees
 *     match, docs/strategies.md).
 *   - mpirun runs in its own process group (a terminal's Ctrl-C reaches only the launcher, which
 *     forwards it) and is sent SIGTERM if the launcher itself dies (PR_SET_PDEATHSIG).
 * What happened is read from the ranks' exit records ($ZT_RUN_DIR/exit-R: the code a rank failed
 * with, written before it aborts; the earliest is the job's, as torchrun's agent reports the
 * first failure as the root cause), from the ranks' own error lines forwarded through mpirun
 * ("zerotrain: error (NAME): ..."; for ranks on hosts that cannot reach the run directory), and
 * from mpirun's exit status and stderr (passed through, line by line): "process rank R ... exited
 * on signal N", "Process name: [[J,1],R] / Exit code: C". So a job whose host was lost ends with
 * the surviving ranks' 5, not with Open MPI's 205 ("lost communication with a remote daemon").
 * With --hostfile the same supervision runs across hosts (mpirun --hostfile). Under a bare
 * mpirun -hostfile or srun the ranks start directly and this file only detects that. */
#include "cli/launch.h"
#include "ckpt/checkpoint.h"
#include "core/atomic_file.h"
#include "core/env.h"
#include "core/stop.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

bool zt_launched_by_mpi(void) {
    static const zt_env_var vars[] = {ZT_ENV_OMPI_COMM_WORLD_SIZE, ZT_ENV_PMI_SIZE, ZT_ENV_PMIX_RANK,
                                      ZT_ENV_SLURM_PROCID, ZT_ENV_MV2_COMM_WORLD_SIZE};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (zt_env(vars[i])) return true;
    return false;
}

void zt_launch_register_rank(int rank) {
    const char *dir = zt_env(ZT_ENV_RUN_DIR);
    if (!dir || !*dir) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/rank-%d.pid", dir, rank);
    zt_atomic_file af;
    if (zt_atomic_open(&af, path, NULL)) return; /* the launcher then signals mpirun instead */
    zt_atomic_commit(&af, fprintf(af.fp, "%d\n", (int)getpid()) > 0, "", NULL);
}

void zt_launch_record_exit(int rank, int code, const char *message) {
    const char *dir = zt_env(ZT_ENV_RUN_DIR);
    if (!dir || !*dir || code == 0) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/exit-%d", dir, rank);
    zt_atomic_file af;
    if (zt_atomic_open(&af, path, NULL)) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char line[400];
    snprintf(line, sizeof line, "%s", message ? message : "");
    for (char *c = line; *c; c++)
        if (*c == '\n') *c = ' ';
    bool ok = fprintf(af.fp, "%d %.6f %s\n", code, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec, line) > 0;
    zt_atomic_commit(&af, ok, "", NULL);
}

/* The earliest exit record of ranks [0, nproc) with a zerotrain code: its rank and code, the
 * message into msg; -1 when none. */
static bool is_zerotrain_code(int c);
static int earliest_exit(const char *dir, int nproc, int *code, char *msg, size_t cap) {
    int rank = -1;
    double first = 0;
    for (int r = 0; r < nproc; r++) {
        char path[4200], text[512] = "";
        snprintf(path, sizeof path, "%s/exit-%d", dir, r);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int c = 0, used = 0;
        double t = 0;
        if (fscanf(f, "%d %lf %n", &c, &t, &used) == 2 && fgets(text, sizeof text, f) && is_zerotrain_code(c) &&
            (rank < 0 || t < first)) {
            rank = r, first = t, *code = c;
            text[strcspn(text, "\n")] = '\0';
            snprintf(msg, cap, "%s", text);
        }
        fclose(f);
    }
    return rank;
}

/* The code of a status name in a rank's error line ("peer" -> 5), 0 when none. */
static int code_of_name(const char *name, size_t len) {
    static const int codes[] = {ZT_ERR_USAGE, ZT_ERR_DATA, ZT_ERR_CKPT, ZT_ERR_PEER, ZT_ERR_NUMERICS,
                                ZT_ERR_NOMEM, ZT_ERR_IO, ZT_ERR_MISMATCH, ZT_ERR_INTERNAL};
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
        const char *n = zt_status_name(codes[i]);
        if (strlen(n) == len && !strncmp(n, name, len)) return codes[i];
    }
    return 0;
}

/* ---- the supervisor ---------------------------------------------------------------------------- */

static volatile sig_atomic_t g_signals, g_last_sig;

static void on_signal(int sig) {
    g_last_sig = sig;
    g_signals++;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int rank_pid(const char *dir, int r) {
    char path[4200];
    snprintf(path, sizeof path, "%s/rank-%d.pid", dir, r);
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1) pid = 0;
        fclose(f);
    }
    return pid;
}

/* Sends sig to every registered rank; mpirun's group too when a rank has not registered yet (it
 * is still starting: nothing to save). */
static void signal_ranks(const char *dir, int nproc, pid_t mpirun, int sig) {
    bool all = true;
    for (int r = 0; r < nproc; r++) {
        int pid = rank_pid(dir, r);
        if (pid > 0) kill(pid, sig);
        else all = false;
    }
    if (!all || sig == SIGKILL) kill(-mpirun, sig);
}

/* What mpirun said about the first rank that failed. */
typedef struct job_news {
    int rank, signal, code; /* -1: not said */
    int abort_rank;         /* MPI_ABORT was invoked on this rank (it reported its own error) */
    int said_code;          /* the first rank error line's code ("zerotrain: error (peer): ..."), 0: none */
    char said[256];         /* ... and that line */
    char line[512];         /* the partial line being read */
    size_t len;
    bool expect_code;       /* "Process name: [[J,1],R]" seen, "Exit code: C" follows */
    bool in_banner;         /* between mpirun's dashed lines */
    char banner[4096];      /* the banner so far */
    size_t banner_len;
} job_news;

/* Reads one of mpirun's lines; true when it is part of a banner the launcher summarizes itself. */
static bool read_line(job_news *n, const char *s) {
    const char *p;
    int r, sig;
    bool known = true;
    if (n->rank < 0 && (p = strstr(s, "process rank ")) && sscanf(p, "process rank %d", &r) == 1 &&
        (p = strstr(s, "exited on signal ")) && sscanf(p, "exited on signal %d", &sig) == 1) {
        n->rank = r;
        n->signal = sig;
    } else if ((p = strstr(s, "Process name: [[")) && (p = strstr(p, "],")) && sscanf(p, "],%d]", &r) == 1) {
        if (n->rank < 0) {
            n->rank = r;
            n->expect_code = true;
        }
    } else if (n->expect_code && (p = strstr(s, "Exit code:")) && sscanf(p, "Exit code: %d", &r) == 1) {
        n->code = r;
        n->expect_code = false;
    } else if ((p = strstr(s, "MPI_ABORT was invoked on rank ")) && sscanf(p, "MPI_ABORT was invoked on rank %d", &r) == 1) {
        if (n->abort_rank < 0) n->abort_rank = r;
    } else {
        known = strstr(s, "Primary job  terminated normally") != NULL;
    }
    return known;
}

static void write_all(const char *s, size_t len) {
    fwrite(s, 1, len, stderr);
    fflush(stderr);
}

/* One complete line of mpirun's stderr (the ranks' stderr comes through it too): passed on, except
 * mpirun's banners about a failed rank or an MPI_Abort, which the launcher's last line replaces. */
static void on_line(job_news *n, const char *s, size_t len) {
    bool dashes = len >= 20 && strspn(s, "-") >= 20;
    if (strstr(s, "has sent help message") || strstr(s, "orte_base_help_aggregate")) return; /* about banners */
    if (!n->in_banner && !dashes) {
        const char *p = strstr(s, "zerotrain: error ("), *q;
        if (p && !n->said_code && (q = strstr(p, "): "))) {
            p += strlen("zerotrain: error (");
            n->said_code = code_of_name(p, (size_t)(q - p));
            if (n->said_code) snprintf(n->said, sizeof n->said, "%.*s", (int)strcspn(p, "\n"), p);
        }
        write_all(s, len);
        return;
    }
    if (n->banner_len + len < sizeof n->banner) {
        memcpy(n->banner + n->banner_len, s, len);
        n->banner_len += len;
    }
    if (!n->in_banner) {
        n->in_banner = true;
        return;
    }
    if (!dashes) return;
    /* the closing line: keep the banner unless one of its lines is one we summarize */
    n->in_banner = false;
    n->banner[n->banner_len < sizeof n->banner ? n->banner_len : sizeof n->banner - 1] = '\0';
    bool known = false;
    for (char *save = NULL, *t = strtok_r(n->banner, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
        known |= read_line(n, t);
    if (!known) {
        n->banner[n->banner_len < sizeof n->banner ? n->banner_len : sizeof n->banner - 1] = '\0';
        for (size_t i = 0; i < n->banner_len && i < sizeof n->banner; i++)
            if (n->banner[i] == '\0') n->banner[i] = '\n'; /* strtok's cuts */
        write_all(n->banner, n->banner_len);
    }
    n->banner_len = 0;
}

/* Splits what mpirun wrote into lines (a partial line waits for its end, or for mpirun's exit). */
static void pass_through(job_news *n, const char *buf, size_t len) {
    for (size_t i = 0; i < len; i++) {
        n->line[n->len++] = buf[i];
        if (buf[i] == '\n' || n->len == sizeof n->line) {
            on_line(n, n->line, n->len);
            n->len = 0;
        }
    }
}

static bool is_zerotrain_code(int c) { return (c >= 2 && c <= 9) || c == 70 || c == 75; }

/* The job's exit code from mpirun's status, what it said and the ranks' exit records in dir. */
static int job_code(const job_news *n, const char *dir, int nproc, int status, bool stopping, bool killed,
                    double grace) {
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (killed) {
        fprintf(stderr, "zerotrain: error (peer): the ranks did not stop within fault.grace_s = %g s of the "
                "stop request: killed, nothing saved since the last commit\n", grace);
        return ZT_ERR_PEER;
    }
    if (code == 0) return 0;
    if (stopping && g_signals >= 2 && n->signal == SIGINT) { /* Ctrl-C twice: the user's call */
        fprintf(stderr, "zerotrain: stopped at once by a second SIGINT: nothing saved since the last commit\n");
        return 128 + SIGINT;
    }
    if (n->rank >= 0 && n->signal > 0) {
        fprintf(stderr, "zerotrain: error (peer): rank %d died of %s (signal %d)%s; the job was stopped\n",
                n->rank, zt_signal_name(n->signal), n->signal, stopping ? " while stopping" : "");
        return ZT_ERR_PEER;
    }
    /* the ranks' own codes: the earliest exit record, else the first error line a rank printed */
    int rec_code = 0;
    char rec[400] = "";
    int rec_rank = earliest_exit(dir, nproc, &rec_code, rec, sizeof rec);
    if (rec_rank >= 0) {
        if (rec_code != code)
            fprintf(stderr, "zerotrain: the job ends with rank %d's exit %d (%s: %.200s); mpirun's own status was %s %d\n",
                    rec_rank, rec_code, zt_status_name(rec_code), rec, WIFEXITED(status) ? "exit code" : "signal",
                    WIFEXITED(status) ? code : WTERMSIG(status));
        return rec_code;
    }
    if (n->said_code && !is_zerotrain_code(code) && n->rank < 0) {
        fprintf(stderr, "zerotrain: the job ends with exit %d, the code of the first rank error (%.200s); mpirun's own "
                "status was %s %d\n", n->said_code, n->said, WIFEXITED(status) ? "exit code" : "signal",
                WIFEXITED(status) ? code : WTERMSIG(status));
        return n->said_code;
    }
    if (n->abort_rank >= 0 && is_zerotrain_code(code)) return code; /* the rank said why */
    if (n->rank >= 0 && n->code >= 0) {
        if (is_zerotrain_code(n->code)) return n->code; /* the rank said why */
        fprintf(stderr, "zerotrain: error (peer): rank %d exited with code %d; the job was stopped\n",
                n->rank, n->code);
        return ZT_ERR_PEER;
    }
    if (is_zerotrain_code(code)) return code;
    fprintf(stderr, "zerotrain: error (peer): mpirun ended with %s %d (its messages above); the job "
            "was stopped\n", WIFEXITED(status) ? "exit code" : "signal", WIFEXITED(status) ? code : WTERMSIG(status));
    return ZT_ERR_PEER;
}

/* Runs args (mpirun ...) as a child and supervises it until it ends; returns the job's code. */
static int supervise(char **args, const char *run_dir, int nproc, double grace, double teardown, int *failed_rank,
                     zt_error *err) {
    int fds[2];
    if (pipe(fds)) return -zt_error_set(err, ZT_ERR_IO, "launch: pipe: %s", strerror(errno));
    struct sigaction sa, old_term, old_int;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    signal(SIGPIPE, SIG_IGN);
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) return -zt_error_set(err, ZT_ERR_IO, "launch: fork: %s", strerror(errno));
    if (child == 0) {
        setpgid(0, 0);                   /* Ctrl-C reaches the launcher only */
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* the launcher gone: mpirun tears the ranks down */
        if (getppid() == 1) _exit(ZT_ERR_PEER);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execvp(args[0], args);
        fprintf(stderr, "zerotrain: error (usage): launch: cannot run %s for %d local ranks: %s (install "
                "openmpi-bin: scripts/setup.sh)\n", args[0], nproc, strerror(errno));
        _exit(ZT_ERR_USAGE);
    }
    setpgid(child, child);
    close(fds[1]);
    job_news news = {.rank = -1, .signal = -1, .code = -1, .abort_rank = -1, .said_code = 0};
    int status = 0, forwarded = 0;
    bool done = false, open_pipe = true, killed = false, torn_down = false;
    double stop_at = 0, record_seen = 0, next_look = 0;
    while (!done || open_pipe) {
        if (open_pipe) {
            struct pollfd p = {.fd = fds[0], .events = POLLIN};
            if (poll(&p, 1, done ? 200 : 50) > 0) {
                char buf[4096];
                ssize_t got = read(fds[0], buf, sizeof buf);
                if (got > 0) pass_through(&news, buf, (size_t)got);
                else if (got == 0 || errno != EINTR) open_pipe = false;
            } else if (done) {
                open_pipe = false; /* mpirun is gone; something it left holds the pipe */
            }
        }
        if (!done) {
            pid_t w = waitpid(child, &status, WNOHANG);
            if (w == child) done = true;
        }
        if (done) continue;
        for (int sigs = g_signals; forwarded < sigs; forwarded++) { /* each signal once, as it came */
            int sig = g_last_sig;
            if (!forwarded) {
                stop_at = mono();
                fprintf(stderr, "zerotrain: %s: asking the %d ranks to save at the next step boundary and stop "
                        "(fault.grace_s = %g s)\n", zt_signal_name(sig), nproc, grace);
            } else {
                usleep(20000); /* two signals at once would merge into one in the rank */
            }
            signal_ranks(run_dir, nproc, child, sig);
        }
        if (forwarded && !killed && mono() - stop_at > grace) {
            killed = true;
            signal_ranks(run_dir, nproc, child, SIGKILL);
        }
        /* a rank failed (its exit record) and called MPI_Abort: mpirun normally ends the job within a
         * second, but waits on a host it cannot reach for as long as TCP retransmits (minutes) */
        if (!forwarded && !torn_down && mono() >= next_look) {
            next_look = mono() + 0.25;
            int code = 0, rank = earliest_exit(run_dir, nproc, &code, (char[8]){0}, 8);
            if (rank < 0 || code == 75) continue; /* stopped on request: the grace above rules */
            if (!record_seen) record_seen = mono();
            if (mono() - record_seen > teardown) {
                torn_down = true;
                fprintf(stderr, "zerotrain: mpirun had not ended %g s after rank %d's exit record (exit %d): the "
                        "launcher stops it (a host it cannot reach? fault.teardown_s)\n", teardown, rank, code);
                signal_ranks(run_dir, nproc, child, SIGKILL);
            }
        }
    }
    if (news.len) on_line(&news, news.line, news.len); /* an unterminated last line */
    if (news.in_banner) write_all(news.banner, news.banner_len);
    close(fds[0]);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    *failed_rank = news.rank;
    return job_code(&news, run_dir, nproc, status, forwarded > 0, killed, grace);
}

/* Removes the run directory's pid files and status boards (left by killed ranks). */
static void clear_ranks(const char *dir, int nproc) {
    char path[4200];
    for (int r = 0; r < nproc; r++) {
        snprintf(path, sizeof path, "%s/rank-%d.pid", dir, r);
        unlink(path);
        snprintf(path, sizeof path, "%s/board-%d", dir, r); /* a killed rank's status board */
        unlink(path);
        snprintf(path, sizeof path, "%s/exit-%d", dir, r); /* an attempt's exit records */
        unlink(path);
    }
}

/* The most ranks a hostfile puts on one host: its largest slots=K (a host line without slots= is
 * one slot, as Open MPI counts it); 0 when the file cannot be read. */
static int hostfile_slots(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int most = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || !*p) continue;
        char *s = strstr(p, "slots=");
        int k = s ? atoi(s + 6) : 1;
        if (k > most) most = k;
    }
    fclose(f);
    return most;
}

int zt_launch_local(int nproc, const zt_launch_policy *pol, int argc, char **argv, zt_error *err) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    char np[32], threads[32];
    snprintf(np, sizeof np, "%d", nproc);
    int per_host = nproc; /* ranks sharing this machine's cores (a hostfile: its largest slots) */
    if (pol->hostfile) {
        if (access(pol->hostfile, R_OK))
            return -zt_error_set(err, ZT_ERR_USAGE, "launch: --hostfile %s: %s", pol->hostfile, strerror(errno));
        int k = hostfile_slots(pol->hostfile);
        if (k > 0 && k < per_host) per_host = k;
    }
    /* split the cores among the ranks unless the user chose */
    if (!zt_env(ZT_ENV_OMP_NUM_THREADS)) {
        snprintf(threads, sizeof threads, "%ld", cores / per_host > 0 ? cores / per_host : 1);
        setenv("OMP_NUM_THREADS", threads, 1);
    }
    /* mpirun hands rank 0 a pseudo-terminal whatever the real stdout is: tell the ranks */
    setenv("ZT_STDOUT_TTY", isatty(STDOUT_FILENO) ? "1" : "0", 1);
    setenv("ZT_LAUNCHED", "1", 1); /* the ranks know the launcher already printed the warnings */
    if (geteuid() == 0) { /* Open MPI refuses root unless told twice */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    /* the job's run directory: where the ranks register their pids (the user's, or a fresh one) */
    char run_dir[4096];
    bool own_dir = !zt_env(ZT_ENV_RUN_DIR) || !*zt_env(ZT_ENV_RUN_DIR);
    if (own_dir) {
        const char *tmp = zt_env_or(ZT_ENV_TMPDIR, "/tmp");
        snprintf(run_dir, sizeof run_dir, "%s/zerotrain-job-XXXXXX", tmp);
        if (!mkdtemp(run_dir))
            return -zt_error_set(err, ZT_ERR_IO, "launch: cannot create the job's run directory %s: %s", run_dir,
                                 strerror(errno));
        setenv("ZT_RUN_DIR", run_dir, 1);
    } else {
        snprintf(run_dir, sizeof run_dir, "%s", zt_env(ZT_ENV_RUN_DIR));
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -zt_error_set(err, ZT_ERR_USAGE, "launch: cannot find my own executable: %s", strerror(errno));
    self[n] = '\0';
    const char *mpirun = zt_env(ZT_ENV_MPIRUN) ? zt_env(ZT_ENV_MPIRUN) : "mpirun";
    /* --mpirun-args: split at white space into a copy the args point into */
    char *extra = pol->mpirun_args ? strdup(pol->mpirun_args) : NULL;
    int n_extra = 0;
    for (const char *p = pol->mpirun_args; p && *p;) {
        p += strspn(p, " \t\n");
        if (*p) n_extra++;
        p += strcspn(p, " \t\n");
    }
    char **args = calloc((size_t)argc + 32 + (size_t)n_extra, sizeof *args);
    if (!args || (pol->mpirun_args && !extra)) {
        free(args), free(extra);
        return -zt_error_set(err, ZT_ERR_NOMEM, "launch: out of memory");
    }
    int k = 0;
    args[k++] = (char *)mpirun;
    args[k++] = "-np";
    args[k++] = np;
    if (pol->hostfile) { /* the hosts' slots decide the placement */
        args[k++] = "--hostfile";
        args[k++] = (char *)pol->hostfile;
    } else if (nproc > cores) args[k++] = "--oversubscribe";
    args[k++] = "--bind-to";
    args[k++] = "none";
    /* mpirun passes its own environment to ranks on this host only: what the ranks need goes with -x */
    const zt_env_var exported[] = {ZT_ENV_OMP_NUM_THREADS, ZT_ENV_STDOUT_TTY, ZT_ENV_LAUNCHED, ZT_ENV_RUN_DIR,
                                   ZT_ENV_RESTART_ATTEMPT, ZT_ENV_COMM_TIMEOUT};
    for (size_t i = 0; i < sizeof exported / sizeof *exported; i++) {
        if (exported[i] == ZT_ENV_COMM_TIMEOUT && !zt_env(ZT_ENV_COMM_TIMEOUT)) continue; /* exported only when set */
        args[k++] = "-x";
        args[k++] = (char *)zt_env_name(exported[i]);
    }
    for (char *save = NULL, *t = extra ? strtok_r(extra, " \t\n", &save) : NULL; t; t = strtok_r(NULL, " \t\n", &save))
        args[k++] = t;
    args[k++] = self;
    int code = 0, attempt = 0, world = nproc, accum = pol->grad_accum, failed = -1, failed_before = -1;
    char ga_set[64];
    for (;; attempt++) {
        char att[16], commit[4200];
        snprintf(att, sizeof att, "%d", attempt);
        setenv("ZT_RESTART_ATTEMPT", att, 1);
        snprintf(np, sizeof np, "%d", world);
        zt_error ignore;
        /* a restart resumes from the newest commit (replacing any --resume of the command line) */
        bool resume = attempt > 0 && pol->ckpt_dir && pol->ckpt_dir[0] &&
                      zt_ckpt_resolve(pol->ckpt_dir, commit, sizeof commit, &ignore) == ZT_OK;
        int m = k;
        for (int i = 0; i < argc; i++) {
            if (resume && !strcmp(argv[i], "--resume") && i + 1 < argc) {
                i++;
                continue;
            }
            args[m++] = argv[i];
        }
        if (resume) {
            args[m++] = "--resume";
            args[m++] = (char *)pol->ckpt_dir;
        }
        if (world != nproc) { /* elastic: the same global batch on fewer ranks */
            snprintf(ga_set, sizeof ga_set, "training.gradient_accumulation_steps=%d", accum);
            args[m++] = "--set";
            args[m++] = ga_set;
        }
        args[m] = NULL;
        clear_ranks(run_dir, world); /* a user's run directory may hold an earlier job's records */
        code = supervise(args, run_dir, world, pol->grace_s, pol->teardown_s > 0 ? pol->teardown_s : 30.0, &failed,
                         err);
        clear_ranks(run_dir, world);
        if (code != ZT_ERR_PEER || g_signals || attempt >= pol->max_restarts) break;
        /* the same rank lost twice in a row: lost for good, continue on fewer ranks if allowed */
        if (failed >= 0 && failed == failed_before && pol->min_nproc > 0 && pol->min_nproc < world && accum > 0) {
            int micro = world * accum, smaller = world - 1;
            while (smaller >= pol->min_nproc && micro % smaller) smaller--;
            if (smaller >= pol->min_nproc) {
                fprintf(stderr, "zerotrain: rank %d failed in two attempts in a row: continuing on %d ranks with "
                        "gradient accumulation %d (the same global batch of %d micro-batches)\n", failed, smaller,
                        micro / smaller, micro);
                world = smaller;
                accum = micro / smaller;
                failed = -1;
            } else {
                fprintf(stderr, "zerotrain: rank %d failed twice, but no world size in [%d, %d] divides the global "
                        "batch's %d micro-batches: trying %d ranks again\n", failed, pol->min_nproc, world - 1, micro,
                        world);
            }
        }
        failed_before = failed;
        fprintf(stderr, "zerotrain: restart %d/%d (--max-restarts): starting the %d ranks again from %s\n", attempt + 1,
                pol->max_restarts, world,
                pol->ckpt_dir && pol->ckpt_dir[0] && zt_ckpt_resolve(pol->ckpt_dir, commit, sizeof commit, &ignore) == 0
                    ? commit : "the command line's start (no commit to resume from)");
    }
    if (code == ZT_ERR_PEER && pol->max_restarts > 0 && attempt >= pol->max_restarts && !g_signals)
        fprintf(stderr, "zerotrain: error (peer): restart budget exhausted (%d/%d); the job failed %d times\n",
                pol->max_restarts, pol->max_restarts, attempt + 1);
    free(args);
    free(extra);
    if (own_dir) {
        clear_ranks(run_dir, nproc);
        rmdir(run_dir);
    }
    return code;
}
