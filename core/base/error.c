/* strata_strerror / strata_err_name from the one STRATA_ERRNO_MAP list. */
#include "internal.h"

const char *strata_strerror(int err)
{
    switch (err) {
    case STRATA_OK: return "success";
#define X_(name, val, str) case STRATA_##name: return str;
    STRATA_ERRNO_MAP(X_)
#undef X_
    default: return "unknown error";
    }
}

const char *strata_err_name(int err)
{
    switch (err) {
    case STRATA_OK: return "STRATA_OK";
#define X_(name, val, str) case STRATA_##name: return "STRATA_" #name;
    STRATA_ERRNO_MAP(X_)
#undef X_
    default: return "STRATA_EUNKNOWN";
    }
}

const char *strata_version(void) { return STRATA_VERSION_STRING; }
