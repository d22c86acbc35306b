/* etc/cnn.ini end to end, as shipped: the Keras MNIST CNN on Fashion-MNIST,
 * 5 epochs at global batch 32, Adam 1e-3, 2 mirrored replicas, reaches at
 * least 89 % test accuracy (PyTorch on this machine: 89.75 % at batch 32,
 * seed 0). */
#include "check.h"
#include "spawn.h"

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed (apt-get install "
                   "dataset-fashion-mnist)");
    const char *src = getenv("STRATA_SRC");
    char ini[600];
    snprintf(ini, sizeof ini, "%s/etc/cnn.ini", src ? src : ".");
    char *argv[] = { (char *)spawn_strata_bin(), "train", "-c", ini, "--set",
                     "train.progress=line", NULL };
    spawn_result_t *r = malloc(sizeof *r);
    spawn_run(argv, 1500, r);
    printf("%s", r->out);
    CHECKF(r->code == 0, "exit %d: %s", r->code, r->err);
    const char *done = strstr(r->out, "done: 5 epochs, test accuracy ");
    CHECK(done != NULL);
    double acc = done ? atof(done + strlen("done: 5 epochs, test accuracy ")) : 0;
    CHECKF(acc >= 0.89, "test accuracy %.4f < 0.89", acc);
    free(r);
    return CHECK_DONE();
}
