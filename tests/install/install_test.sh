#!/usr/bin/env bash
# The install tree and the third-party plugin kit, end to end.
#
#   install_test.sh BUILD_DIR SOURCE_DIR
#
# Installs BUILD_DIR into a temp prefix and, using nothing but that prefix:
# checks the tree and the installed headers; lists the plugins with no
# STRATA_* variable set; builds contrib/example-plugin (localsgd.so) out of
# tree with find_package(strata), installs it to a second prefix, lists it
# and trains with it (accuracy, config errors, sync semantics); builds a
# plugin and an application through pkg-config, an application through
# strata::strata; installs with DESTDIR. Prints "N passed, N failed".
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2
    exit 2
fi
BUILD=$(cd "$1" && pwd) || exit 2
SRC=$(cd "$2" && pwd) || exit 2

pass=0
fail=0
ok()  { pass=$((pass + 1)); echo "ok   - $*"; }
bad() { fail=$((fail + 1)); echo "FAIL - $*"; }
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ] && exit 0 || exit 1
}

T=$(mktemp -d "${TMPDIR:-/tmp}/strata-install.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
cd "$T" || exit 1
CMAKE_BIN=${STRATA_TEST_CMAKE:-cmake}      # the cmake that configured BUILD

# No STRATA_* variable of the caller may steer the installed binary.
for v in $(compgen -e); do
    case $v in STRATA_*) unset "$v" ;; esac
done

# step SECONDS NAME CMD...: run CMD bounded, output in $T/NAME.log, exit
# status in $rc; the log's tail is shown when a check on it fails.
rc=0
step() {
    local secs=$1 name=$2
    shift 2
    timeout --kill-after=10 "$secs" "$@" >"$T/$name.log" 2>&1
    rc=$?
    [ "$rc" -eq 124 ] && echo "# $name: timed out after $secs s"
    return 0
}
show() { echo "# --- $1.log (tail)"; tail -n 15 "$T/$1.log" | sed 's/^/#   /'; }
# expect NAME WANT_RC WHAT [REGEX...]: $rc is WANT_RC and the log matches
# every extended REGEX.
expect() {
    local name=$1 want=$2 what=$3 re
    shift 3
    if [ "$rc" -ne "$want" ]; then
        bad "$what (exit $rc, expected $want)"
        show "$name"
        return 1
    fi
    for re in "$@"; do
        if ! grep -Eq -- "$re" "$T/$name.log"; then
            bad "$what (no line matches /$re/)"
            show "$name"
            return 1
        fi
    done
    ok "$what"
}
# Literal text as an extended regex.
q() { printf '%s' "$1" | sed 's/[][\\.*^$?+(){}|]/\\&/g'; }

cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
CC_BUILD=$(cache CMAKE_C_COMPILER)
CC=${CC_BUILD:-cc}
SAN=$(cache STRATA_SANITIZE)
SANFLAGS=""
[ -n "$SAN" ] && SANFLAGS="-fsanitize=$SAN"
V=$(sed -n 's/^#define STRATA_VERSION_STRING "\(.*\)"$/\1/p' \
        "$SRC/include/strata/version.h")
VMAJOR=${V%%.*}

# ---- 1. cmake --install ----------------------------------------------------
P=$T/prefix
PD=$P/lib/strata/plugins
step 180 install "$CMAKE_BIN" --install "$BUILD" --prefix "$P"
expect install 0 "cmake --install into a temp prefix" || finish

missing=""
for f in bin/strata "lib/libstrata.so.$V" \
         lib/strata/plugins/mirrored.so lib/strata/plugins/central.so \
         lib/strata/plugins/local.so lib/strata/plugins/mwms.so \
         include/strata/strata.h include/strata/plugin.h \
         include/strata/abi/plugin_v1.h include/strata/abi/plugin_v2.h \
         include/strata/errno.h \
         include/strata/version.h lib/pkgconfig/strata.pc \
         lib/cmake/strata/strataConfig.cmake \
         lib/cmake/strata/strataConfigVersion.cmake; do
    [ -f "$P/$f" ] || missing="$missing $f"
done
for f in "$SRC"/etc/*.ini; do
    [ -f "$P/share/strata/etc/${f##*/}" ] || missing="$missing share/strata/etc/${f##*/}"
done
[ -z "$missing" ] && ok "installed tree is complete" \
                  || bad "installed tree lacks:$missing"
if [ "$(readlink "$P/lib/libstrata.so.$VMAJOR")" = "libstrata.so.$V" ] &&
   [ "$(readlink "$P/lib/libstrata.so")" = "libstrata.so.$VMAJOR" ]; then
    ok "libstrata.so -> libstrata.so.$VMAJOR -> libstrata.so.$V"
else
    bad "libstrata symlinks: $(ls -l "$P"/lib/libstrata.so* 2>&1 | tr '\n' ' ')"
fi

# ---- 2. the installed headers are self-contained -----------------------------
hdr_fail=""
for h in plugin.h strata.h errno.h version.h; do
    printf '#include <strata/%s>\nint probe_(void);\nint probe_(void) { return 0; }\n' \
        "$h" >"$T/h_$h.c"
    timeout 60 "$CC" -std=c11 -Wall -Wextra -Werror -pedantic -I"$P/include" \
        -c "$T/h_$h.c" -o "$T/h.o" >>"$T/hdr.log" 2>&1 || hdr_fail="$hdr_fail C:$h"
    if command -v g++ >/dev/null; then
        timeout 60 g++ -x c++ -Wall -Wextra -Werror -pedantic -I"$P/include" \
            -c "$T/h_$h.c" -o "$T/h.o" >>"$T/hdr.log" 2>&1 || hdr_fail="$hdr_fail C++:$h"
    fi
done
[ -z "$hdr_fail" ] && ok "each installed header compiles alone (C11 -pedantic -Werror, C++)" \
                   || { bad "headers do not compile alone:$hdr_fail"; show hdr; }
if command -v g++ >/dev/null && command -v nm >/dev/null; then
    printf '#include <strata/strata.h>\nconst char *v_(); const char *v_() { return strata_version(); }\n' \
        >"$T/cxx.cc"
    if timeout 60 g++ -I"$P/include" -c "$T/cxx.cc" -o "$T/cxx.o" >"$T/cxx.log" 2>&1 &&
       nm "$T/cxx.o" | grep -Eq ' U strata_version$'; then
        ok "C++ sees the C names (extern \"C\")"
    else
        bad "C++ does not reference the unmangled strata_version"; show cxx
    fi
fi

# ---- 3. the installed binary finds its own plugins and library ---------------
step 60 version "$P/bin/strata" --version
expect version 0 "strata --version says $V" "^strata $(q "$V") \(plugin ABI [0-9]+\.[0-9]+\)" 
if command -v ldd >/dev/null; then
    ldd "$P/bin/strata" >"$T/ldd.log" 2>&1
    lib=$(sed -n "s/^[[:space:]]*libstrata\.so\.$VMAJOR => \([^ ]*\) .*/\1/p" "$T/ldd.log")
    [ -n "$lib" ] && [ "$(readlink -f "$lib")" = "$(readlink -f "$P/lib/libstrata.so.$VMAJOR")" ] \
        && ok "bin/strata loads the installed libstrata" \
        || { bad "bin/strata does not load $P/lib/libstrata.so.$VMAJOR"; show ldd; }
fi
step 60 plugins env -u STRATA_PLUGIN_PATH "$P/bin/strata" plugins
res=()
for n in mirrored central mwms; do res+=("^$n +strategy +2\.[0-9]+ .* $(q "$PD/$n.so")\$"); done
res+=("^local +transport +2\.[0-9]+ .* $(q "$PD/local.so")\$")
expect plugins 0 "strata plugins (no STRATA_PLUGIN_PATH) finds <bin>/../lib/strata/plugins" \
    "${res[@]}"
if grep -q BROKEN "$T/plugins.log"; then bad "a shipped plugin is BROKEN"; show plugins; fi

# ---- 4. contrib/example-plugin, out of tree, against the prefix only ----------
EX=$T/ex
MY=$T/myplugins
MYD=$MY/lib/strata/plugins
step 180 ex_config "$CMAKE_BIN" -S "$SRC/contrib/example-plugin" -B "$EX" \
    -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release
expect ex_config 0 "example-plugin configures with find_package(strata)"
[ "$(sed -n 's/^strata_DIR:PATH=//p' "$EX/CMakeCache.txt" 2>/dev/null)" = "$P/lib/cmake/strata" ] \
    && ok "strata_DIR is the temp prefix's package" \
    || bad "strata_DIR is not $P/lib/cmake/strata"
step 180 ex_build "$CMAKE_BIN" --build "$EX"
expect ex_build 0 "example-plugin builds"
step 60 ex_install "$CMAKE_BIN" --install "$EX" --prefix "$MY"
expect ex_install 0 "example-plugin installs into its own prefix"
SO=$MYD/localsgd.so
if [ -f "$SO" ]; then
    ok "localsgd.so is at $MYD"
    if command -v nm >/dev/null; then
        syms=$(nm -D --defined-only "$SO" | awk '{print $3}' | tr '\n' ' ')
        [ "$syms" = "strata_plugin_v2 " ] && ok "localsgd.so exports only strata_plugin_v2" \
                                          || bad "localsgd.so exports: $syms"
    fi
    if command -v readelf >/dev/null; then
        readelf -d "$SO" | grep -q 'NEEDED.*libstrata' \
            && bad "localsgd.so links libstrata" || ok "localsgd.so does not link libstrata"
    fi
else
    bad "no $SO"
fi

step 60 my_plugins "$P/bin/strata" plugins --set "plugins.path=$MYD"
expect my_plugins 0 "strata plugins --set plugins.path lists localsgd" \
    "^localsgd +strategy +2\.[0-9]+ +1\.0\.0 .* $(q "$SO")\$"

# ---- 5. training with localsgd ---------------------------------------------------
DATA=/usr/share/datasets/fashion-mnist
if [ ! -r "$DATA/train-images-idx3-ubyte.gz" ]; then
    echo "# SKIP training checks: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
else
    cat >"$T/localsgd.ini" <<EOF
; written by tests/install/install_test.sh
[strategy]
plugin = localsgd

[strategy.localsgd]
sync_every = 4

[train]
devices = cpu:0, cpu:1
batch_size = 32
epochs = 1
progress = line

[plugins]
path = $MYD
EOF
    step 300 train "$P/bin/strata" train -c "$T/localsgd.ini"
    expect train 0 "localsgd trains 1 epoch on 2 replicas" \
        "strategy localsgd, transport local" "^done: 1 epoch, test accuracy"
    acc=$(sed -n 's/^done: .* test accuracy \([0-9.]*\),.*/\1/p' "$T/train.log")
    # Measured: 0.8445 (Adam, lr 0.001, seed 42); mirrored reaches about the same.
    if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }'; then
        ok "localsgd test accuracy $acc >= 0.80"
    else
        bad "localsgd test accuracy '${acc}' < 0.80"
    fi

    SHORT=(--set data.limit_train=2000 --set train.eval=false --set train.max_steps=40
           --set train.progress=none)
    cat >"$T/typo.ini" <<EOF
[strategy]
plugin = localsgd
[strategy.localsgd]
sync_evry = 4
[plugins]
path = $MYD
EOF
    step 60 typo "$P/bin/strata" train -c "$T/typo.ini" "${SHORT[@]}"
    expect typo 2 "an unknown localsgd key is refused with file:line and a suggestion" \
        "^strata: config: error: $(q "$T/typo.ini"):4: \[strategy.localsgd\] unknown key 'sync_evry'; did you mean 'sync_every'\?\$"

    step 60 range "$P/bin/strata" train -c "$T/localsgd.ini" "${SHORT[@]}" \
        --set strategy.localsgd.sync_every=0
    expect range 2 "sync_every = 0 is refused" \
        "--set: \[strategy.localsgd\] sync_every = '0': expected an integer >= 1"
    # The shared [strategy] section still reaches the plugin, with a warning.
    step 60 flat "$P/bin/strata" train -c "$T/localsgd.ini" "${SHORT[@]}" \
        --set strategy.sync_every=0
    expect flat 2 "a deprecated [strategy] key still reaches the plugin" \
        "--set: \[strategy\] sync_every: plugin keys in \[strategy\] are deprecated; write them in \[strategy.NAME\]" \
        "--set: \[strategy\] sync_every = '0': expected an integer >= 1"

    step 60 notfound "$P/bin/strata" train -c "$T/localsgd.ini" "${SHORT[@]}" \
        --set strategy.plugin=localsdg
    expect notfound 3 "a misspelt plugin name gets the search path and a suggestion" \
        "strategy plugin 'localsdg' not found; looked in: $(q "$MYD"), .*; did you mean 'localsgd'\?"

    # A strategy without checkpoint support is told so before its first step.
    step 60 nostate "$P/bin/strata" train -c "$T/localsgd.ini" "${SHORT[@]}" \
        --set "checkpoint.dir=$T/ck" --set checkpoint.every_steps=5
    expect nostate 1 "[checkpoint] with a strategy that has no state hooks fails at the start" \
        "strategy localsgd cannot save its state: \[checkpoint\] needs a strategy with STRATA_CTL_STATE_GET/SET"
    if ls "$T/ck"/*.safetensors >/dev/null 2>&1 || grep -q "wrote .*ckpt" "$T/nostate.log"; then
        bad "a checkpoint was attempted before the refusal"
    else
        ok "refused before any step: no checkpoint"
    fi

    # Replicas are bitwise equal after every step when they sync every step...
    step 120 sync1 "$P/bin/strata" train -c "$T/localsgd.ini" "${SHORT[@]}" \
        --set strategy.localsgd.sync_every=1 --set debug.check_sync=true
    expect sync1 0 "sync_every = 1: replicas bitwise equal after every step"
    # ...and really step alone in between.
    step 120 sync4 "$P/bin/strata" train -c "$T/localsgd.ini" "${SHORT[@]}" \
        --set debug.check_sync=true
    expect sync4 1 "sync_every = 4: replicas differ between syncs" \
        "step 0: replica 1's .* differs from replica 0's"

    # While local_after has not been reached, localsgd is synchronous training:
    # bitwise the same variables as mirrored.
    sed -e 's/^plugin = localsgd/plugin = mirrored/' -e '/^sync_every/d' \
        "$T/localsgd.ini" >"$T/mirrored.ini"
    step 120 mirrored "$P/bin/strata" train -c "$T/mirrored.ini" "${SHORT[@]}" \
        --set "debug.dump_vars=$T/mirrored.bin"
    expect mirrored 0 "mirrored reference run"
    step 120 postlocal "$P/bin/strata" train -c "$T/localsgd.ini" "${SHORT[@]}" \
        --set strategy.local_after=40 --set "debug.dump_vars=$T/localsgd.bin"
    expect postlocal 0 "localsgd with local_after = 40"
    if [ -s "$T/mirrored.bin" ] && cmp -s "$T/mirrored.bin" "$T/localsgd.bin"; then
        ok "localsgd before local_after == mirrored, bitwise"
    else
        bad "localsgd (local_after = 40) and mirrored variables differ"
    fi
fi

# ---- 6. pkg-config: a plugin and an application without CMake ---------------------
if command -v pkg-config >/dev/null; then
    export PKG_CONFIG_PATH=$P/lib/pkgconfig
    cflags=$(pkg-config --cflags strata 2>&1 | sed 's/[[:space:]]*$//')
    [ "$cflags" = "-I$P/include" ] && ok "pkg-config --cflags strata = -I<prefix>/include" \
                                   || bad "pkg-config --cflags strata = '$cflags'"
    [ "$(pkg-config --modversion strata 2>&1)" = "$V" ] && ok "pkg-config --modversion = $V" \
                                                       || bad "pkg-config --modversion"
    [ "$(pkg-config --variable=plugindir strata 2>&1)" = "$PD" ] \
        && ok "pkg-config --variable=plugindir = <prefix>/lib/strata/plugins" \
        || bad "pkg-config plugindir = '$(pkg-config --variable=plugindir strata 2>&1)'"
    mkdir -p "$T/pc"
    cat >"$T/pc/tiny.c" <<'EOF'
#include <strata/plugin.h>

static int tiny_init(const strata_host_v2_t *host, strata_hctx_t *hc,
                     const strata_env_t *env, void **pctx)
{
    (void)host; (void)hc; (void)env;
    *pctx = NULL;
    return STRATA_EDECLINE;
}
static void tiny_fini(void *pctx) { (void)pctx; }
static int tiny_reduce(void *pctx, strata_op_t *op)
{
    (void)pctx; (void)op;
    return STRATA_ENOTSUP;
}

STRATA_EXPORT const strata_plugin_v2_t strata_plugin_v2 = {
    STRATA_PLUGIN_HEADER(STRATA_KIND_TRANSPORT, "tiny", "0.0.1",
                         "built with pkg-config"),
    .init = tiny_init, .fini = tiny_fini, .reduce = tiny_reduce,
};
EOF
    # A second copy whose header name does not match its file: BROKEN.
    sed 's/"tiny", "0.0.1"/"wrong", "0.0.1"/' "$T/pc/tiny.c" >"$T/pc/broken.c"
    step 60 pc_plugin bash -c "$CC -std=c11 -Wall -Wextra -Werror -pedantic -fPIC \
        -fvisibility=hidden -shared $cflags -o '$T/pc/tiny.so' '$T/pc/tiny.c' &&
        $CC -std=c11 -fPIC -fvisibility=hidden -shared $cflags \
        -o '$T/pc/broken.so' '$T/pc/broken.c'"
    expect pc_plugin 0 "a plugin compiles with \$(pkg-config --cflags strata) -std=c11 -pedantic"
    step 60 pc_list "$P/bin/strata" plugins --set "plugins.path=$T/pc"
    expect pc_list 0 "strata plugins lists it, and a broken one as BROKEN" \
        "^tiny +transport +2\.[0-9]+ +0\.0\.1 +built with pkg-config" \
        "^broken +transport .*BROKEN: plugin ABI mismatch +$(q "$T/pc/broken.so")\$"
    if [ -r "$DATA/train-images-idx3-ubyte.gz" ]; then
        step 60 pc_refuse "$P/bin/strata" train -c "$T/localsgd.ini" "${SHORT[@]}" \
            --set "plugins.path=$T/pc:$MYD" --set transport.plugin=broken
        expect pc_refuse 3 "loading it names the file and the reason" \
            "loader: error: $(q "$T/pc/broken.so"): header name 'wrong' does not match the file name 'broken'"
        step 60 pc_decline "$P/bin/strata" train -c "$T/localsgd.ini" "${SHORT[@]}" \
            --set "plugins.path=$T/pc:$MYD" --set "transport.plugin=tiny, local"
        expect pc_decline 0 "a transport that declines gives way to the next one listed"
    fi

    printf '#include <stdio.h>\n#include <strata/strata.h>\nint main(void) { puts(strata_version()); return 0; }\n' \
        >"$T/pc/app.c"
    step 60 pc_app bash -c "$CC $SANFLAGS -std=c11 -Wall -Werror '$T/pc/app.c' -o '$T/pc/app' \
        \$(pkg-config --cflags --libs strata) -Wl,-rpath,'$P/lib' && '$T/pc/app'"
    expect pc_app 0 "an application links with \$(pkg-config --libs strata)" "^$(q "$V")\$"
    unset PKG_CONFIG_PATH
else
    echo "# pkg-config not installed: its checks are skipped"
fi

# ---- 7. CMake: an application through strata::strata -------------------------------
APP=$T/app
step 180 app_config "$CMAKE_BIN" -S "$SRC/tests/install/app" -B "$APP" \
    -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="$SANFLAGS"
expect app_config 0 "an application configures with find_package(strata)"
step 180 app_build "$CMAKE_BIN" --build "$APP"
expect app_build 0 "it builds against strata::strata"
step 60 app_run "$APP/strata_app"
expect app_run 0 "it runs; STRATA_PLUGIN_INSTALL_DIR is the prefix's plugin dir" \
    "^strata $(q "$V"), plugin dir $(q "$PD")\$" \
    "^plugin mirrored strategy ok $(q "$PD/mirrored.so")\$"

# ---- 8. DESTDIR: staged install, paths still name the final prefix ------------------
FINAL=/opt/strata-install-test-$$
step 180 destdir env DESTDIR="$T/stage" "$CMAKE_BIN" --install "$BUILD" --prefix "$FINAL"
expect destdir 0 "cmake --install with DESTDIR"
if grep -qx "prefix=$FINAL" "$T/stage$FINAL/lib/pkgconfig/strata.pc" 2>/dev/null &&
   [ -f "$T/stage$FINAL/lib/cmake/strata/strataConfig.cmake" ] && [ ! -e "$FINAL" ]; then
    ok "DESTDIR staging: strata.pc says prefix=$FINAL, nothing outside the stage"
else
    bad "DESTDIR staging of strata.pc / strataConfig.cmake"
fi

finish
