/* strata keygen DIR TASK...: a CURVE key pair per task, in ZeroMQ's
 * certificate format (czmq's zcert, which zmq tools read): TYPE-INDEX.key
 * holds the public key (mode 0644), TYPE-INDEX.key_secret both keys (mode
 * 0600), in DIR (made 0700 when missing). The keys come from libzmq
 * (zmq_curve_keypair, libsodium underneath): no crypto of our own. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cli.h"
#include "base/createfile.h"

static const char *const k_usage =
    "usage: strata keygen [--force] DIR TASK...\n"
    "\n"
    "Write a CURVE key pair for every TASK (TYPE:INDEX, or TYPE:FIRST-LAST\n"
    "for several: worker:0-3 ps:0-1 chief:0) into DIR, created with mode\n"
    "0700 when missing: TYPE-INDEX.key (public) and TYPE-INDEX.key_secret\n"
    "(mode 0600), in ZeroMQ's certificate format. Point every task of the\n"
    "job at DIR with [security] keys = DIR (a shared filesystem, or a copy\n"
    "per machine: each task needs every public key and its own secret one).\n"
    "Existing keys are kept unless --force.\n";

/* "worker:0-3" -> type "worker", first 0, last 3. 0 or -1. */
static int parse_task(const char *s, char *type, size_t cap, long *first,
                      long *last)
{
    const char *colon = strchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= cap)
        return -1;
    for (const char *p = s; p < colon; p++)
        if (!((*p >= 'a' && *p <= 'z') || *p == '_'))
            return -1;
    memcpy(type, s, (size_t)(colon - s));
    type[colon - s] = '\0';
    char *end;
    errno = 0;
    *first = strtol(colon + 1, &end, 10);
    *last = *first;
    if (*end == '-')
        *last = strtol(end + 1, &end, 10);
    return errno || *end || colon[1] < '0' || colon[1] > '9' || *first < 0 ||
                   *last < *first || *last > 65535
               ? -1 : 0;
}

/* A certificate's text into text[cap]; its length, or -1 when it does
 * not fit. */
static int cert_text(char *text, size_t cap, int secret, const char *name,
                     const char *pub, const char *sec)
{
    char stamp[64];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", gmtime_r(&now, &tm));
    int n = snprintf(text, cap,
        "#   ****  Generated on %s UTC by strata keygen  ****\n"
        "#   ZeroMQ CURVE %s Certificate\n"
        "#   %s\n"
        "\n"
        "metadata\n"
        "    name = \"%s\"\n"
        "curve\n"
        "    public-key = \"%s\"\n%s%s%s",
        stamp, secret ? "**Secret**" : "Public",
        secret ? "DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its "
                 "permissions."
               : "Exchange securely, or use a secure mechanism to verify "
                 "the contents of this file after exchange.",
        name, pub, secret ? "    secret-key = \"" : "", secret ? sec : "",
        secret ? "\"\n" : "");
    return n > 0 && (size_t)n < cap ? n : -1;
}

int cli_keygen_pair(const char *type, long index, char *pub_cert,
                    char *sec_cert, size_t cap)
{
    char name[96], pub[41], sec[41];
    snprintf(name, sizeof name, "%s:%ld", type, index);
    if (zmq_curve_keypair(pub, sec) != 0) {
        fprintf(stderr, "strata: keygen: no CURVE in this libzmq (%s): "
                "install a libzmq built with libsodium\n",
                zmq_strerror(zmq_errno()));
        return -1;
    }
    int ok = cert_text(sec_cert, cap, 1, name, pub, sec) > 0 &&
             cert_text(pub_cert, cap, 0, name, pub, NULL) > 0;
    memset(sec, 0, sizeof sec);
    return ok ? 0 : -1;
}

/* One certificate file, written whole or not at all. */
static int write_cert(const char *path, int secret, const char *text,
                      int force)
{
    char tmp[4200];
    int n = (int)strlen(text);
    /* Anything at the name (a link too, dangling or not) is kept. */
    struct stat st;
    if (!force && lstat(path, &st) == 0) {
        fprintf(stderr, "strata: keygen: %s exists; keeping it (--force "
                "replaces it)\n", path);
        return 1;
    }
    /* A new temp file, renamed over the name: --force replaces what is
     * there (a link itself, never its target). */
    int fd = strata__create_temp(path, tmp, sizeof tmp, secret ? 0600 : 0644);
    if (fd < 0) {
        fprintf(stderr, "strata: keygen: cannot create %s: %s\n", tmp,
                strerror(-fd));
        return 1;
    }
    errno = EIO; /* a short write sets none */
    int ok = fchmod(fd, secret ? 0600 : 0644) == 0 &&
             write(fd, text, (size_t)n) == n && fsync(fd) == 0;
    if (close(fd) != 0)
        ok = 0;
    if (ok && rename(tmp, path) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "strata: keygen: cannot write %s: %s\n", path,
                strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

int cli_keygen_task(const char *dir, const char *type, long index, int force)
{
    char stem[96], path[4096], pub[CLI_CERT_MAX], sec[CLI_CERT_MAX];
    snprintf(stem, sizeof stem, "%s-%ld", type, index);
    if (cli_keygen_pair(type, index, pub, sec, sizeof pub) != 0)
        return 1;
    /* The secret one first: a public key without its secret is no use. */
    snprintf(path, sizeof path, "%s/%s.key_secret", dir, stem);
    int rc = write_cert(path, 1, sec, force);
    snprintf(path, sizeof path, "%s/%s.key", dir, stem);
    if (rc == 0)
        rc = write_cert(path, 0, pub, force);
    memset(sec, 0, sizeof sec);
    return rc;
}

int cli_keygen_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "strata: keygen: cannot make %s: %s\n", dir,
                strerror(errno));
        return 1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "strata: keygen: %s is not a directory\n", dir);
        return 1;
    }
    if (st.st_mode & 022) {
        fprintf(stderr, "strata: keygen: %s has mode %04o: others could "
                "replace keys there (chmod go-w '%s')\n", dir,
                (unsigned)(st.st_mode & 07777), dir);
        return 1;
    }
    return 0;
}

int cli_keygen(int argc, char **argv)
{
    int force = 0, i = 0;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(k_usage, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--force") != 0) {
            fprintf(stderr, "strata: keygen: unknown option '%s'\n%s",
                    argv[i], k_usage);
            return 2;
        }
        force = 1;
    }
    if (argc - i < 2) {
        fprintf(stderr, "strata: keygen needs DIR and at least one TASK\n%s",
                k_usage);
        return 2;
    }
    const char *dir = argv[i++];
    char type[32];
    long first, last;
    for (int j = i; j < argc; j++)
        if (parse_task(argv[j], type, sizeof type, &first, &last) != 0) {
            fprintf(stderr, "strata: keygen: '%s' is not TYPE:INDEX or "
                    "TYPE:FIRST-LAST (e.g. worker:0-3)\n%s", argv[j], k_usage);
            return 2;
        }
    if (cli_keygen_dir(dir) != 0)
        return 1;
    int rc = 0, made = 0;
    for (; i < argc && rc == 0; i++) {
        parse_task(argv[i], type, sizeof type, &first, &last);
        for (long k = first; k <= last && rc == 0; k++, made++)
            rc = cli_keygen_task(dir, type, k, force);
    }
    if (rc == 0)
        printf("keygen: %d key pair%s in %s\n", made, made == 1 ? "" : "s",
               dir);
    return rc;
}
