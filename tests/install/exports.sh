#!/bin/bash
# libstrata.so exports strata_* and nothing else (no kernel symbols, no
# internal strata__ ones): the dynamic symbol table, as a linker sees it.
set -euo pipefail
lib=$(ls "$1"/lib/libstrata.so.*.*.* | head -n 1)
defined=$(nm -D --defined-only "$lib" | awk '{print $3}')
echo "$(echo "$defined" | wc -l) dynamic symbols in $lib"
bad=$(echo "$defined" | grep -v '^strata_[a-z]' || true)
if [ -n "$bad" ]; then
    echo "FAIL: exported besides the public API:" >&2
    echo "$bad" | head -n 20 >&2
    exit 1
fi
for sym in strata_ctx_create strata_train strata_strerror; do
    echo "$defined" | grep -qx "$sym" || { echo "FAIL: $sym missing" >&2; exit 1; }
done
echo "1 passed, 0 failed"
