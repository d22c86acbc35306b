/* The progress bar on a terminal never wraps: `strata train` runs with its
 * stdout on a pseudo-terminal of 80 columns (and then of 50), and every
 * redrawn line (the text between two '\r') fits in the width; a wrapped
 * one would scroll a new line at every redraw. */
#include <pty.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "check.h"
#include "spawn.h"

static void on_terminal(int cols)
{
    int master, slave;
    struct winsize ws = { .ws_row = 24, .ws_col = (unsigned short)cols };
    CHECK(openpty(&master, &slave, NULL, NULL, &ws) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(slave, STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDERR_FILENO);
        close(master);
        char *argv[] = { (char *)spawn_strata_bin(), "train", "--set",
                         "train.epochs=2", "--set", "data.limit_train=19200",
                         "--set", "train.devices=cpu:0", "--set",
                         "train.progress=bar", "--set",
                         "debug.step_delay_ms=1", NULL };
        unsetenv("COLUMNS");
        execv(argv[0], argv);
        _exit(127);
    }
    close(slave);
    static char out[1 << 20];
    size_t n = 0;
    for (int i = 0; i < 1200 && n < sizeof out - 1; i++) { /* 60 s at most */
        struct pollfd p = { .fd = master, .events = POLLIN };
        if (poll(&p, 1, 50) > 0) {
            ssize_t r = read(master, out + n, sizeof out - 1 - n);
            if (r <= 0)
                break; /* EIO once the child is gone */
            n += (size_t)r;
        }
    }
    out[n] = '\0';
    close(master);
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "strata exit %d",
           status);
    /* Redrawn lines: each text that a '\r' ends (a '\n' ends the last; the
     * terminal turns every '\n' into "\r\n"). */
    int redraws = 0, longest = 0;
    const char *start = out;
    for (const char *c = out; *c; c++) {
        if (*c == '\n' || (*c == '\r' && c[1] == '\n')) {
            if (*c == '\r')
                c++;
            start = c + 1;
        } else if (*c == '\r') {
            int len = (int)(c - start);
            if (len > 0 && strchr(start, '[') && strchr(start, '[') < c) {
                redraws++;
                longest = len > longest ? len : longest;
            }
            start = c + 1;
        }
    }
    printf("%d columns: %d redraws, the longest %d characters\n", cols,
           redraws, longest);
    CHECKF(redraws >= 2, "%d columns: %d redraws in:\n%.2000s", cols, redraws,
           out);
    CHECKF(longest < cols, "%d columns: a redrawn line of %d characters "
           "wraps", cols, longest);
}

int main(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    on_terminal(80);
    on_terminal(50);
    return CHECK_DONE();
}
