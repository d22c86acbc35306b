/* The job's CURVE keys ([security] keys = DIR): one key pair per task, in
 * ZeroMQ's certificate format (czmq's zcert: a public file TYPE-INDEX.key
 * and a secret file TYPE-INDEX.key_secret holding both keys), as
 * `strata keygen` writes them. This file only reads and checks them: the
 * crypto is libzmq's (the transports'), never the core's.
 *
 * What is refused, one line each, naming the file and what to do: a key
 * directory or public key file that is group- or world-writable or owned
 * by another user (someone could swap a key), a directory above it that
 * others could write (they could move the key directory away and put
 * theirs there: base/trustdir.h), a secret file that others may read, a
 * file that is not a certificate, a key that is not 40 characters of
 * Z85. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"
#include "base/keybundle.h"
#include "base/trustdir.h"

#define WHO "security"
#define CERT_MAX 4096 /* a certificate is a few hundred bytes */

static int z85_char(char ch)
{
    static const char k[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
                            "KLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
    return ch != '\0' && strchr(k, ch) != NULL;
}

/* `strata keygen DIR worker:1` -> "worker-1" (':' is awkward in file
 * names on some filesystems). */
static void file_stem(const char *task, char *out, size_t len)
{
    snprintf(out, len, "%s", task);
    for (char *p = out; *p; p++)
        if (*p == ':')
            *p = '-';
}

/* Owned by us (or root) and writable by nobody else; for a secret file,
 * readable by nobody else either. */
static int check_owner_mode(const char *path, const struct stat *st,
                            int secret)
{
    uid_t me = geteuid();
    if (st->st_uid != me && st->st_uid != 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s is owned by uid %u, not by "
                    "you (uid %u) or root: refused", path,
                    (unsigned)st->st_uid, (unsigned)me);
        return STRATA_ECONFIG;
    }
    mode_t bad = secret ? 077 : 022;
    if (st->st_mode & bad) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s has mode %04o: %s; refused "
                    "(chmod %s '%s')", path, (unsigned)(st->st_mode & 07777),
                    secret ? "others may read the secret key"
                           : "others may replace the key",
                    secret ? "600" : "go-w", path);
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

/* The value of `key = "..."` in a certificate, into out (cap bytes). */
static int cert_value(const char *text, const char *key, char *out,
                      size_t cap)
{
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *p = line;
        while (p < line + len && (*p == ' ' || *p == '\t'))
            p++;
        if (*p != '#' && (size_t)(line + len - p) > klen &&
            strncmp(p, key, klen) == 0) {
            p += klen;
            while (p < line + len && (*p == ' ' || *p == '\t' || *p == '='))
                p++;
            const char *q = p < line + len && *p == '"' ? p + 1 : NULL;
            const char *qe = q ? memchr(q, '"', (size_t)(line + len - q)) : NULL;
            if (!qe || (size_t)(qe - q) >= cap)
                return -1;
            memcpy(out, q, (size_t)(qe - q));
            out[qe - q] = '\0';
            return 0;
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

/* A key file is read as itself: not through a link, never waiting on a
 * FIFO or a device (opened non-blocking, then checked to be a regular
 * file before a byte is read). */
static int read_cert(const char *path, int secret, char *text, size_t cap)
{
    struct stat st;
    text[0] = '\0';
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        strata__log(STRATA_LOG_ERROR, WHO, "cannot read %s: %s", path,
                    e == ELOOP ? "a symbolic link; a key file is read only as "
                                 "itself (copy the file there)"
                               : strerror(e));
        return e == ENOENT ? STRATA_ENOENT : e == ELOOP ? STRATA_ECONFIG
                                                          : STRATA_EIO;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: not a regular file (a FIFO, "
                    "a device or a directory is never read as a key)", path);
        close(fd);
        return STRATA_ECONFIG;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        strata__log(STRATA_LOG_ERROR, WHO, "cannot read %s: %s", path,
                    strerror(errno));
        close(fd);
        return STRATA_EIO;
    }
    int rc = check_owner_mode(path, &st, secret);
    size_t n = rc == STRATA_OK ? fread(text, 1, cap - 1, f) : 0;
    if (rc == STRATA_OK && (ferror(f) || n == cap - 1)) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: %s", path, ferror(f)
                    ? "read error" : "longer than a certificate");
        rc = STRATA_EDATA;
    }
    fclose(f);
    text[n] = '\0';
    return rc;
}

/* A Z85 key of 40 characters under `key` in the certificate at `path`. */
static int cert_key(const char *path, const char *text, const char *key,
                    char out[41])
{
    char v[64];
    int ok = cert_value(text, key, v, sizeof v) == 0 && strlen(v) == 40;
    for (int i = 0; ok && i < 40; i++)
        ok = z85_char(v[i]);
    if (!ok) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: no valid %s (40 characters "
                    "of Z85 in a ZeroMQ certificate: strata keygen writes "
                    "them)", path, key);
        return STRATA_EDATA;
    }
    memcpy(out, v, 41);
    return STRATA_OK;
}

/* The public certificate `text` (read from `path`) as key k->n. */
static int add_public(strata__keys_t *k, const char *path, const char *text)
{
    if (k->n == STRATA__MAX_KEYS) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: more than %d keys", path,
                    STRATA__MAX_KEYS);
        return STRATA_ECONFIG;
    }
    strata__key_t *key = &k->key[k->n];
    int rc = cert_key(path, text, "public-key", key->pub);
    if (rc == STRATA_OK &&
        cert_value(text, "name", key->name, sizeof key->name) != 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: no name = \"TYPE:INDEX\" "
                    "in its metadata", path);
        rc = STRATA_EDATA;
    }
    for (int i = 0; rc == STRATA_OK && i < k->n; i++)
        if (strcmp(k->key[i].name, key->name) == 0) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: a second key for %s",
                        path, key->name);
            rc = STRATA_EDATA;
        }
    k->n += rc == STRATA_OK;
    return rc;
}

/* Task `self`'s secret certificate `text` (from `path`), whose public key
 * must be the one its public certificate holds (file `stem`.key). */
static int take_secret(strata__keys_t *k, const char *self, const char *stem,
                       const char *path, const char *text)
{
    const char *pub = strata__keys_public(k, self);
    char mine[41];
    int rc = cert_key(path, text, "secret-key", k->secret);
    if (rc == STRATA_OK)
        rc = cert_key(path, text, "public-key", mine);
    if (rc == STRATA_OK && (!pub || strcmp(pub, mine) != 0)) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: its public key is %s %s.key",
                    path, pub ? "not the one in" : "not in", stem);
        rc = STRATA_EDATA;
    }
    return rc;
}

int strata__keys_load(const char *dir, const char *self, strata__keys_t *k)
{
    memset(k, 0, sizeof *k);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        const char *why = access(dir, F_OK) != 0 ? strerror(errno)
                                                 : "not a directory";
        strata__log(STRATA_LOG_ERROR, WHO, "[security] keys = '%s': %s", dir,
                    why);
        return STRATA_ECONFIG;
    }
    int rc = check_owner_mode(dir, &st, 0);
    if (rc != STRATA_OK)
        return rc;
    strata__untrusted_t bad;
    if (strata__trust_dirs(dir, &bad) != 0) {
        char why[PATH_MAX * 2 + 200];
        strata__log(STRATA_LOG_ERROR, WHO, "[security] keys = '%s': refused: "
                    "%s", dir, strata__untrusted_why(&bad, why, sizeof why));
        return STRATA_ECONFIG;
    }
    char path[4096], stem[96], text[CERT_MAX];
    /* Every public key in the directory: the job's members. */
    DIR *d = opendir(dir);
    if (!d) {
        strata__log(STRATA_LOG_ERROR, WHO, "cannot list %s: %s", dir,
                    strerror(errno));
        return STRATA_EIO;
    }
    struct dirent *e;
    while (rc == STRATA_OK && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".key") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rc = read_cert(path, 0, text, sizeof text);
        if (rc == STRATA_OK)
            rc = add_public(k, path, text);
    }
    closedir(d);
    if (rc != STRATA_OK)
        return rc;
    /* This task's own secret key, which must match its public one. */
    file_stem(self, stem, sizeof stem);
    snprintf(path, sizeof path, "%s/%s.key_secret", dir, stem);
    rc = read_cert(path, 1, text, sizeof text);
    if (rc == STRATA_OK)
        rc = take_secret(k, self, stem, path, text);
    if (rc == STRATA_ENOENT)
        strata__log(STRATA_LOG_ERROR, WHO, "no key for task %s in %s "
                    "(strata keygen %s %s adds one)", self, dir, dir, self);
    return rc == STRATA_ENOENT ? STRATA_ECONFIG : rc;
}

/* A launch's memfd: a regular file of ours, read whole from offset 0 (a
 * task launch restarts inherits the same open file, offset included). */
static int read_bundle(int fd, const char *what, char **out, size_t *len)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid() ||
        st.st_size > (off_t)(STRATA__MAX_KEYS + 1) * CERT_MAX) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: not the keys strata launch "
                    "hands its tasks", what);
        return STRATA_ECONFIG;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        return STRATA_ENOMEM;
    ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
    if (n != (ssize_t)st.st_size) {
        strata__log(STRATA_LOG_ERROR, WHO, "cannot read %s: %s", what,
                    n < 0 ? strerror(errno) : "short read");
        free(buf);
        return STRATA_EIO;
    }
    buf[n] = '\0';
    *out = buf;
    *len = (size_t)n;
    return STRATA_OK;
}

int strata__keys_load_fd(int fd, const char *self, strata__keys_t *k)
{
    memset(k, 0, sizeof *k);
    char what[64], stem[96], secret_name[112], path[200], text[CERT_MAX];
    snprintf(what, sizeof what, "launch's keys (fd %d)", fd);
    file_stem(self, stem, sizeof stem);
    snprintf(secret_name, sizeof secret_name, "%s.key_secret", stem);
    char *buf = NULL;
    size_t len = 0;
    int rc = read_bundle(fd, what, &buf, &len), secret = 0;
    /* Records "strata-key NAME LEN\n" + LEN bytes (base/keybundle.h). */
    for (size_t at = 0; rc == STRATA_OK && at < len;) {
        char line[128], name[96];
        size_t n = 0;
        int used = -1;
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - (buf + at)) : 0;
        if (nl && ll < sizeof line) {
            memcpy(line, buf + at, ll);
            line[ll] = '\0';
            sscanf(line, STRATA__KEYS_REC_SCAN "%n", name, &n, &used);
        }
        if (used != (int)ll || n >= sizeof text ||
            n > len - (size_t)(nl + 1 - buf)) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: malformed at byte %zu",
                        what, at);
            rc = STRATA_EDATA;
            break;
        }
        memcpy(text, nl + 1, n);
        text[n] = '\0';
        at = (size_t)(nl + 1 - buf) + n;
        snprintf(path, sizeof path, "%s: %s", what, name);
        if (!strcmp(name, secret_name)) {
            secret = 1;
            rc = take_secret(k, self, stem, path, text);
        } else if (!secret) {
            rc = add_public(k, path, text);
        } else {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: after the secret key",
                        path);
            rc = STRATA_EDATA;
        }
    }
    if (buf)
        memset(buf, 0, len);
    free(buf);
    if (rc == STRATA_OK && !secret) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: no secret key for task %s",
                    what, self);
        rc = STRATA_ECONFIG;
    }
    memset(text, 0, sizeof text);
    /* Read once; no program this task runs needs it. */
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return rc;
}

const char *strata__keys_public(const strata__keys_t *k, const char *name)
{
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->key[i].name, name) == 0)
            return k->key[i].pub;
    return NULL;
}
