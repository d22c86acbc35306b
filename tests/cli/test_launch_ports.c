/* strata launch holds each task's port from its draw until the job ends:
 * through the binary, `strata launch -n 3 -- test_launch_ports probe` runs
 * this program as every task, and each task finds in TF_CONFIG that a
 * plain bind() of any task's port -- another launch's probe, another
 * program's -- is refused, that the kernel's bind(0) never hands one out,
 * and that its own port takes a listener (SO_REUSEADDR, as zmq's) that a
 * client reaches. After the job, every port is free again. Before, launch
 * probed a port and let it go: another test's launch drew the same one
 * and its task failed with "cannot listen ...: Address already in use"
 * (CI, train_shard_mwms).
 * usage: test_launch_ports [probe] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "spawn.h"

#define TASKS 3

/* A socket on 127.0.0.1:port (0: any), SO_REUSEADDR first when `reuse`;
 * -1 with errno when bind() refuses. *got: the port bound. */
static int bind_port(int port, int reuse, int *got)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (fd < 0 || (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
                                       sizeof one) != 0) ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    if (got)
        *got = ntohs(a.sin_port);
    return fd;
}

/* The ports "127.0.0.1:P" in `text` after `after`, into port[max]. */
static int ports_in(const char *text, const char *after, int *port, int max)
{
    int n = 0;
    for (const char *p = strstr(text, after); p && n < max;
         p = strstr(p + 1, after))
        port[n++] = atoi(p + strlen(after));
    return n;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* One task of the job: its checks, one line each, exit 1 on the first
 * that fails. */
static int probe(void)
{
    const char *tf = getenv("TF_CONFIG");
    const char *task = strstr(tf ? tf : "", "\"index\": ");
    int port[TASKS], n = ports_in(tf ? tf : "", "127.0.0.1:", port, TASKS);
    if (n != TASKS || !task) {
        fprintf(stderr, "probe: TF_CONFIG without %d tasks: %s\n", TASKS,
                tf ? tf : "(unset)");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        int fd = bind_port(port[i], 0, NULL);
        if (fd >= 0 || errno != EADDRINUSE) {
            fprintf(stderr, "probe: a plain bind of task %d's port %d: %s\n",
                    i, port[i], fd >= 0 ? "bound (launch let it go)"
                                        : strerror(errno));
            return 1;
        }
    }
    /* The kernel's choice skips a port held, as it skips a listener's. */
    for (int k = 0; k < 4000; k++) {
        int got = 0, fd = bind_port(0, 0, &got);
        if (fd >= 0)
            close(fd);
        for (int i = 0; i < n; i++)
            if (got == port[i]) {
                fprintf(stderr, "probe: bind(0) got task %d's port %d\n", i,
                        got);
                return 1;
            }
    }
    int self = port[atoi(task + strlen("\"index\": "))];
    int ls = bind_port(self, 1, NULL);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)self),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (ls < 0 || listen(ls, 4) != 0 || c < 0 ||
        connect(c, (struct sockaddr *)&a, sizeof a) != 0) {
        fprintf(stderr, "probe: listening on its own port %d: %s\n", self,
                strerror(errno));
        return 1;
    }
    int s = accept(ls, NULL, NULL);
    printf("probe ok: port %d listened on, %d held\n", self, n);
    close(c); /* the client's end first: its TIME_WAIT is not the port's */
    if (s >= 0)
        close(s);
    close(ls);
    return s >= 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "probe"))
        return probe();
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(len > 0);
    self[len > 0 ? len : 0] = '\0';
    char *av[] = { (char *)spawn_strata_bin(), "launch", "-n", "3", "--",
                   self, "probe", NULL };
    spawn_result_t *r = malloc(sizeof *r);
    CHECK(r && spawn_run(av, 120, r) == 0);
    CHECKF(r->code == 0 && count(r->out, "probe ok") == TASKS,
           "exit %d:\n%s%s", r->code, r->out, r->err);
    int port[TASKS], n = ports_in(r->out, ", 127.0.0.1:", port, TASKS);
    CHECKF(n == TASKS, "%d task ports in launch's lines:\n%s", n, r->out);
    for (int i = 0; i < n; i++) {
        int fd = bind_port(port[i], 0, NULL);
        CHECKF(fd >= 0, "port %d still held after the job: %s", port[i],
               strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    free(r);
    return CHECK_DONE();
}
