/* shapes.c - the estimator's models: any preset of the engine's models (shapes.h). */
#include "memory/shapes.h"

int zt_estimator_model(const char *name, zt_attention attention, zt_model **out, zt_error *err) {
    *out = NULL;
    zt_model_spec spec;
    int rc = zt_model_preset(name, &spec, err);
    spec.gpt2.attention = spec.llama.attention = attention;
    return rc ? rc : zt_model_spec_create(&spec, out, err);
}
