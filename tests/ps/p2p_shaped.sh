#!/bin/bash
# zmq.so's point to point over a slow link: two members (p2p_link.c) in two
# network namespaces joined by a veth pair shaped to 20 Mbit/s each way
# (tc htb), heartbeat_ms 300 (a connection whose peer is silent for 0.9 s
# is closed). A 16 MiB message takes 6.7 s on that link: as one zmq frame
# the receiver's heartbeat timed out while it arrived, the connection was
# closed and the message lost, again on every resend (p2p.h); in frames of
# STRZ_P2P_CHUNK (0.4 s each here) it arrives intact. Skipped (77) where
# the namespaces or the shaping cannot be made (not root, no iproute2).
# usage: p2p_shaped.sh P2P_LINK [BYTES [RATE_MBIT]]
set -u
prog=$1 bytes=${2:-16777216} mbit=${3:-20}
netns_no_data=1
. "$(dirname "$0")/../netns_pair.sh" p 100
command -v tc >/dev/null || skip "tc (iproute2) not installed"
for dev in "$a:veth-a" "$b:veth-b"; do
    ip netns exec "${dev%%:*}" tc qdisc add dev "${dev#*:}" root handle 1: htb default 1 \
        2>"$tmp/err" || skip "cannot shape the link (tc htb): $(cat "$tmp/err")"
    ip netns exec "${dev%%:*}" tc class add dev "${dev#*:}" parent 1: classid 1:1 \
        htb rate "${mbit}mbit" quantum 1514 2>"$tmp/err" ||
        skip "cannot shape the link (tc htb class): $(cat "$tmp/err")"
done

# The namespaces are the test's own: any port is free there.
port=$((20000 + RANDOM % 20000))
run() { # namespace rank: 30 s for the message (member 1 resends every 10 s)
    timeout -k 5 60 ip netns exec "$1" "$prog" "$2" "$ipa:$port" "$ipb:$port" \
        "$bytes" 300 30 >"$tmp/out$2" 2>"$tmp/err$2"
}
run "$a" 0 & pids+=($!)
run "$b" 1 & pids+=($!)
wait "${pids[0]}"; r0=$?
wait "${pids[1]}"; r1=$?
pids=()
cat "$tmp/out0" "$tmp/out1"
[ $r0 -eq 77 ] || [ $r1 -eq 77 ] && skip "zmq.so not found (STRATA_PLUGIN_PATH)"
check "member 0 received the message intact (exit $r0: $(tail -3 "$tmp/err0"))" '[ $r0 -eq 0 ]'
check "member 1 got its ack (exit $r1: $(tail -3 "$tmp/err1"))" '[ $r1 -eq 0 ]'
# the link was that slow: the shaping is in effect (else this proves nothing)
took=$(sed -n 's/^member 1: delivered [0-9]* bytes in \([0-9.]*\) s.*/\1/p' "$tmp/out1")
least=$(awk -v b="$bytes" -v m="$mbit" 'BEGIN { printf "%.1f", b * 8 / (m * 1e6) * 0.7 }')
check "delivery took at least $least s on a ${mbit} Mbit/s link (took ${took:-?} s)" \
    'awk -v t="${took:-0}" -v l="$least" "BEGIN { exit !(t >= l) }"'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
