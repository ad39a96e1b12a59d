/* step_deadline.c - the training loop's collective deadline (train_internal.h, docs/reliability.md):
 * comm.timeout_s or ZT_COMM_TIMEOUT fixed, else set from the slowest step and the slowest save or
 * evaluation so far. */
#include "core/env.h"
#include "train/train_internal.h"

#include <math.h>
#include <stdlib.h>

void zt_step_deadline_init(zt_step_deadline *d, const zt_train_config *cfg, FILE *out) {
    const char *env = zt_env(ZT_ENV_COMM_TIMEOUT);
    *d = (zt_step_deadline){.automatic = !(cfg->comm_timeout_s > 0) && !(env && *env)};
    if (cfg->comm_timeout_s > 0) zt_comm_set_job_timeout(cfg->comm_timeout_s);
    if (cfg->comm_timeout_s > 0)
        fprintf(out, "collective deadline %g s (comm.timeout_s)\n", cfg->comm_timeout_s);
    else if (!d->automatic)
        fprintf(out, "collective deadline %s s (ZT_COMM_TIMEOUT)\n", env);
}

void zt_step_deadline_for_steps(const zt_step_deadline *d) {
    if (d->automatic && d->slowest_step > 0) zt_comm_set_job_timeout(fmax(60.0, 10.0 * d->slowest_step));
}

void zt_step_deadline_for_save(const zt_step_deadline *d) {
    if (d->automatic) zt_comm_set_job_timeout(fmax(300.0, 10.0 * d->slowest_save));
}
