# Two "machines" on one host for the shell tests: network namespaces $a and
# $b joined by a veth pair ($ipa <-> $ipb, a /30 of the test's own), made
# here and removed at exit with every pid in pids[] and the temp dir $tmp.
# Where they cannot be made (not root, no iproute2, no netns support) the
# test reports SKIPPED with the reason (exit 77). Also: check NAME EXPR,
# skip REASON, counters passed/failed. A test that reads no Fashion-MNIST
# sets netns_no_data=1 first.
# usage: . netns_pair.sh TAG OCTET   (TAG names the namespaces, OCTET in
# 1..200 picks the test's 10.OCTET+ range so that two tests never share one)
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }
skip() { echo "SKIPPED: $*"; exit 77; }
command -v ip >/dev/null || skip "iproute2 (ip) not installed"
[ -n "${netns_no_data:-}" ] || [ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
    skip "Fashion-MNIST not installed"

id=$$
a=strata-$1a-$id b=strata-$1b-$id
# derived from the pid too, so that parallel runs differ
net=10.$(($2 + id % 50)).$(((id / 50) % 250)).
ipa=${net}1 ipb=${net}2
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    ip netns del "$a" 2>/dev/null
    ip netns del "$b" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$a" 2>"$tmp/err" || skip "cannot create a network namespace: $(cat "$tmp/err")"
ip netns add "$b" || skip "cannot create a second network namespace"
ip link add veth-a netns "$a" type veth peer name veth-b netns "$b" 2>"$tmp/err" ||
    skip "cannot create a veth pair: $(cat "$tmp/err")"
ip -n "$a" addr add "$ipa/30" dev veth-a && ip -n "$b" addr add "$ipb/30" dev veth-b &&
ip -n "$a" link set veth-a up && ip -n "$b" link set veth-b up &&
ip -n "$a" link set lo up && ip -n "$b" link set lo up || skip "cannot configure the veth pair"
