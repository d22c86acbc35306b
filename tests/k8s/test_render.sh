#!/bin/sh
# contrib/k8s/render.sh: the manifests of N workers, checked as a cluster
# would see them, without one:
#   - each rank's pod mounts the public keys and its own secret key, and no
#     other Secret (it received every task's secret key before);
#   - a start-up race is tolerated: backoffLimit >= 1, restartPolicy
#     OnFailure (it was backoffLimit: 0);
#   - RANK, hostname and the secret key's file agree; MASTER_ADDR is rank
#     0's DNS name under the headless Service; the YAML parses (PyYAML);
#   - the committed mwms-job.yaml is render.sh 4's output;
#   - a bad worker count is refused.
# usage: test_render.sh SRC_DIR
set -u
src=${1:?usage: test_render.sh SRC_DIR}
render=$src/contrib/k8s/render.sh
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAILED: $*"; fail=1; }

n=3
sh "$render" $n > "$tmp/all.yaml" || bad "render.sh $n exited $?"
# one file per document
awk -v d="$tmp" 'BEGIN { k = 0 } /^---$/ { k++; next } { print > (d "/doc" k) }' "$tmp/all.yaml"
[ -f "$tmp/doc0" ] && grep -q '^kind: Service' "$tmp/doc0" || bad "no Service first"
grep -q 'clusterIP: None' "$tmp/doc0" || bad "the Service is not headless"
r=0
while [ $r -lt $n ]; do
    f=$tmp/doc$((r + 1))
    [ -f "$f" ] || { bad "no Job for rank $r"; r=$((r + 1)); continue; }
    grep -q "^  name: strata-mwms-$r\$" "$f" || bad "rank $r: Job name"
    secrets=$(grep 'secretName:' "$f" | awk '{ print $2 }' | sort | tr '\n' ' ')
    [ "$secrets" = "strata-key-worker-$r strata-keys-public " ] ||
        bad "rank $r mounts Secrets '$secrets', want its own and the public keys"
    others=$(grep -o 'worker-[0-9]*\.key_secret\|strata-key-worker-[0-9]*' "$f" |
             grep -v "worker-$r\(\.key_secret\)\?\$" | sort -u)
    [ -z "$others" ] || bad "rank $r names another task's key: $others"
    bl=$(awk '/backoffLimit:/ { print $2 }' "$f")
    [ -n "$bl" ] && [ "$bl" -ge 1 ] || bad "rank $r: backoffLimit '$bl' (a start-up race fails the job)"
    grep -q 'restartPolicy: OnFailure' "$f" || bad "rank $r: restartPolicy"
    grep -q "name: RANK, value: \"$r\"" "$f" || bad "rank $r: RANK"
    grep -q "hostname: strata-mwms-$r\$" "$f" || bad "rank $r: hostname"
    grep -q "name: WORLD_SIZE, value: \"$n\"" "$f" || bad "rank $r: WORLD_SIZE"
    grep -q 'name: MASTER_ADDR, value: strata-mwms-0.strata-mwms }' "$f" ||
        bad "rank $r: MASTER_ADDR"
    r=$((r + 1))
done
[ ! -f "$tmp/doc$((n + 1))" ] || bad "more documents than the Service and $n Jobs"

sh "$render" 4 | cmp -s - "$src/contrib/k8s/mwms-job.yaml" ||
    bad "contrib/k8s/mwms-job.yaml is not render.sh 4's output (regenerate it)"
for w in 0 x 2000; do
    if sh "$render" $w > /dev/null 2>&1; then bad "render.sh $w accepted"; fi
done

# Well-formed YAML, where a parser is installed (kubectl's dry run needs a
# cluster to ask for its API): every document parses, the keys as checked.
if python3 -c 'import yaml' > /dev/null 2>&1; then
    python3 - "$tmp/all.yaml" $n <<'PY' || bad "the YAML does not parse as meant"
import sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
n = int(sys.argv[2])
assert len(docs) == n + 1 and docs[0]["kind"] == "Service"
for r, d in enumerate(docs[1:]):
    spec = d["spec"]["template"]["spec"]
    names = sorted(v["secret"]["secretName"] for v in spec["volumes"])
    assert names == ["strata-key-worker-%d" % r, "strata-keys-public"], names
    env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
    assert env["RANK"] == str(r) and d["spec"]["backoffLimit"] >= 1
PY
fi
[ $fail -eq 0 ] && echo "k8s manifests: $n ranks checked"
exit $fail
