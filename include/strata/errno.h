/* strata -- error codes shared by the core, plugins and applications.
 *
 * One list generates the enum and the strings (cf. libuv's UV_ERRNO_MAP).
 * 0 is success; every error is a small negative number. Codes are ABI: a
 * code's number never changes and new codes are only appended. */
#ifndef STRATA_ERRNO_H
#define STRATA_ERRNO_H

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_ERRNO_MAP(X)                                              \
    X(EINVAL,    -1,  "invalid argument")                                \
    X(ENOMEM,    -2,  "out of memory")                                   \
    X(ENOTSUP,   -3,  "operation not supported")                         \
    X(EDECLINE,  -4,  "plugin declined (not usable here)")               \
    X(EABI,      -5,  "plugin ABI mismatch")                             \
    X(ENOENT,    -6,  "not found")                                       \
    X(EIO,       -7,  "input/output error")                              \
    X(ECONFIG,   -8,  "invalid configuration")                           \
    X(EDATA,     -9,  "corrupt or invalid data")                         \
    X(ETIMEDOUT, -10, "timed out")                                       \
    X(EPEER,     -11, "peer failed or disconnected")                     \
    X(EPROTO,    -12, "malformed or unexpected message")                 \
    X(EAGAIN,    -13, "resource temporarily unavailable, try again")     \
    X(ECANCELED, -14, "canceled")                                        \
    X(EDEVICE,   -15, "device error")                                    \
    X(ESTATE,    -16, "call out of order")                               \
    X(EINTERNAL, -17, "internal error")                                  \
    X(ENOPLUGIN, -18, "plugin not found")                                \
    X(ESTOPPED,  -19, "stopped on request; restart to resume")          \
    X(EDIVERGED, -20, "training diverged: a non-finite loss")           \
    X(EUNTRUSTED, -21, "not trusted: others could have written it")

enum strata_errno {
    STRATA_OK = 0,
#define STRATA_ERRNO_ENUM_(name, val, str) STRATA_##name = (val),
    STRATA_ERRNO_MAP(STRATA_ERRNO_ENUM_)
#undef STRATA_ERRNO_ENUM_
    STRATA_ERRNO_LAST_ = -22
};

#ifdef __cplusplus
}
#endif
#endif /* STRATA_ERRNO_H */
