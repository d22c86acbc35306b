/* The INI layer: core/config/config.c reads the input as a config file
 * (strata__cfg_load_file: inih, strata's line reader, BOM, overlong lines,
 * staging, duplicate keys, the key limit), then core/config/settings.c applies it
 * (strata__settings_load: every core option's type, range and enum,
 * unknown keys and sections with their suggestions, plugin sections).
 * Invariants: a refused file leaves the store empty; settings that load
 * hold values within their declared bounds and strings that live until
 * strata__cfg_free. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "internal.h"

static void check_str(const char *s, size_t size)
{
    FUZZ_CHECK(s != NULL);
    FUZZ_CHECK(strlen(s) <= size + 64); /* input or a built-in default */
}

static void check_settings(const strata__settings_t *s, size_t size)
{
    FUZZ_CHECK(s->train.epochs >= 1 && s->train.epochs <= 1000000);
    FUZZ_CHECK(s->train.batch_size >= 1 && s->train.batch_size <= 1000000);
    FUZZ_CHECK(s->train.lr_scaling == 0 || s->train.lr_scaling == 1);
    FUZZ_CHECK(s->train.progress >= 0 && s->train.progress <= 3);
    FUZZ_CHECK(isfinite(s->train.warmup_epochs) && s->train.warmup_epochs >= 0);
    FUZZ_CHECK(s->train.max_steps >= 0);
    FUZZ_CHECK(s->optimizer.name >= 0 &&
               s->optimizer.name < STRATA__OPT_COUNT);
    FUZZ_CHECK(isfinite(s->optimizer.lr) && s->optimizer.lr >= 1e-12);
    FUZZ_CHECK(s->optimizer.beta1 >= 0 && s->optimizer.beta1 < 1);
    FUZZ_CHECK(s->optimizer.beta2 >= 0 && s->optimizer.beta2 < 1);
    FUZZ_CHECK(s->optimizer.momentum >= 0 && s->optimizer.momentum < 1);
    FUZZ_CHECK(s->optimizer.epsilon >= 1e-12 && s->optimizer.epsilon <= 1);
    FUZZ_CHECK(s->optimizer.rho >= 0 && s->optimizer.rho < 1);
    FUZZ_CHECK(s->optimizer.rmsprop_momentum >= 0 &&
               s->optimizer.rmsprop_momentum < 1);
    FUZZ_CHECK(isfinite(s->optimizer.initial_accumulator_value) &&
               s->optimizer.initial_accumulator_value >= 0);
    FUZZ_CHECK(s->security.mode >= 0 && s->security.mode <= 2);
    FUZZ_CHECK(s->log.level >= 0 && s->log.level <= 3);
    FUZZ_CHECK(s->debug.step_delay_ms >= 0 && s->debug.step_delay_ms <= 600000);
    FUZZ_CHECK(s->checkpoint.every_steps >= 0 && s->checkpoint.keep >= 0);
    FUZZ_CHECK(s->checkpoint.restore == 0 || s->checkpoint.restore == 1);
    FUZZ_CHECK(s->data.limit_train >= 0 && s->data.limit_test >= 0);
    const char *strs[] = {
        s->train.devices, s->train.metrics_csv, s->model.layers,
        s->model.init_from, s->data.dir, s->data.train_images,
        s->data.train_labels, s->data.test_images, s->data.test_labels,
        s->plugins.path, s->security.keys, s->debug.dump_vars,
        s->debug.delay_task, s->checkpoint.dir, s->strategy,
        s->transport.plugin, s->transport.local, s->transport.world,
    };
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
        check_str(strs[i], size);
    /* settings.c refuses an empty plugin name or transport list */
    FUZZ_CHECK(s->strategy[strspn(s->strategy, " ,")] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    strata__cfg_t *c;
    FUZZ_CHECK(strata__cfg_new(&c) == 0);
    int rc = strata__cfg_load_file(c, fuzz_as_file(data, size));
    const char *const *sec = strata__cfg_sections(c);
    if (rc != 0) {
        FUZZ_CHECK(rc < 0);
        FUZZ_CHECK(sec[0] == NULL); /* a bad file changes nothing */
    } else {
        for (; *sec; sec++) {
            FUZZ_CHECK(strlen(*sec) <= size);
            FUZZ_CHECK(strata__cfg_origin(c, *sec, NULL) != NULL);
        }
        strata__settings_t s;
        rc = strata__settings_load(c, &s);
        FUZZ_CHECK(rc <= 0);
        if (rc == 0)
            check_settings(&s, size);
    }
    strata__cfg_free(c);
    return 0;
}
