#!/bin/bash
# mwms_sealed: one mwms job of 2 workers through `strata launch`, with the
# workers' data on the direct sockets (shm = off), three times: secured
# with bulk_cipher = aes256gcm (the default: AES-256-GCM records), secured
# with bulk_cipher = curve (every byte on CurveZMQ), and [security] mode =
# off. The final variables (debug.dump_vars) must be the same bits, and the
# first run must say that its data travelled as AES-256-GCM records.
#
#   sealed_test.sh PATH/strata
# Exit 77 (skipped) on a CPU without AES-NI/PCLMULQDQ: zmq.so then says so
# and keeps the data on CURVE.
set -u
strata=$1
tmp=$(mktemp -d /tmp/strata-sealed-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
grep -qw aes /proc/cpuinfo && grep -qw pclmulqdq /proc/cpuinfo || {
    echo "SKIPPED: no AES-NI/PCLMULQDQ"; exit 77; }
fail=0
for mode in transport.zmq.bulk_cipher=aes256gcm \
            transport.zmq.bulk_cipher=curve security.mode=off; do
    name=${mode##*=}
    timeout 240 "$strata" launch -n 2 --set strategy.plugin=mwms \
        --set transport.plugin=zmq --set train.devices=cpu:0 \
        --set train.max_steps=20 --set data.limit_train=1600 \
        --set train.eval=false --set transport.zmq.shm=off \
        --set log.level=info --set "$mode" \
        --set "debug.dump_vars=$tmp/$name.bin" >"$tmp/$name.log" 2>&1
    rc=$?
    echo "$mode: exit $rc"
    if [ $rc -ne 0 ]; then
        tail -20 "$tmp/$name.log"
        fail=1
    fi
done
[ $fail -eq 0 ] || exit 1
grep -q 'travel as AES-256-GCM records' "$tmp/aes256gcm.log" || {
    echo "FAIL: the aes256gcm run did not seal its data"; exit 1; }
if grep -q 'AES-256-GCM records' "$tmp/curve.log" "$tmp/off.log"; then
    echo "FAIL: curve or plaintext run sealed its data"; exit 1
fi
cmp "$tmp/aes256gcm.bin" "$tmp/curve.bin" && cmp "$tmp/aes256gcm.bin" \
    "$tmp/off.bin" || { echo "FAIL: the variables differ"; exit 1; }
echo "mwms_sealed: aes256gcm = curve = plaintext, bitwise"
