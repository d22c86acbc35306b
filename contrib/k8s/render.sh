#!/bin/sh
# Render the Kubernetes manifests of a strata mwms job of N workers (one
# per pod) to stdout: a headless Service and one Job per rank. One Job per
# rank, not one Indexed Job, so that each pod mounts only what it needs:
# the public keys of every task (Secret strata-keys-public) and its own
# secret key (Secret strata-key-worker-R), never another task's.
#
#   strata keygen keys worker:0-3
#   kubectl create secret generic strata-keys-public \
#       $(for f in keys/*.key; do printf ' --from-file=%s' "$f"; done)
#   for r in 0 1 2 3; do kubectl create secret generic strata-key-worker-$r \
#       --from-file=keys/worker-$r.key_secret; done
#   contrib/k8s/render.sh 4 > job.yaml && kubectl apply -f job.yaml
#
# usage: render.sh WORKERS [IMAGE] [PORT]
set -eu
n=${1:?usage: render.sh WORKERS [IMAGE] [PORT]}
image=${2:-strata:latest}
port=${3:-29400}
case $n in ''|*[!0-9]*) echo "render.sh: WORKERS must be a number" >&2; exit 2;; esac
[ "$n" -ge 1 ] && [ "$n" -le 1024 ] || { echo "render.sh: 1 to 1024 workers" >&2; exit 2; }
name=strata-mwms

cat <<EOF
# Rendered by contrib/k8s/render.sh $n: a strata mwms job of $n workers.
apiVersion: v1
kind: Service
metadata:
  name: $name                  # pods are $name-R.$name
spec:
  clusterIP: None              # headless: one DNS record per pod
  publishNotReadyAddresses: true
  selector:
    app: $name
EOF
r=0
while [ "$r" -lt "$n" ]; do
cat <<EOF
---
apiVersion: batch/v1
kind: Job
metadata:
  name: $name-$r
spec:
  # A pod that loses a start-up race (rank 0 not up within the rendezvous
  # timeout, a node that is slow to pull) is started again; rank 0 retries
  # its own name while its DNS record appears.
  backoffLimit: 4
  template:
    metadata:
      labels: { app: $name, rank: "$r" }
    spec:
      hostname: $name-$r
      subdomain: $name         # = the Service's name
      restartPolicy: OnFailure
      containers:
      - name: worker
        image: $image
        env:
        - { name: RANK, value: "$r" }
        - { name: WORLD_SIZE, value: "$n" }
        - { name: LOCAL_WORLD_SIZE, value: "1" }
        - { name: MASTER_ADDR, value: $name-0.$name }
        - { name: MASTER_PORT, value: "$port" }
        - { name: STRATA_CLUSTER_RENDEZVOUS_TIMEOUT_S, value: "600" }
        - { name: STRATA_SECURITY_KEYS, value: /run/strata/keys }
        # strata refuses keys that others may read or replace; a Secret's
        # volume is shared, so the pod copies them to a private directory.
        command: ["/bin/sh", "-c"]
        args:
        - install -d -m 700 /run/strata/keys &&
          install -m 644 /secret/public/*.key /run/strata/keys/ &&
          install -m 600 /secret/own/worker-$r.key_secret /run/strata/keys/ &&
          exec strata train -c /usr/local/share/strata/etc/mwms.ini
        ports:
        - containerPort: $port   # the rendezvous, on rank 0
        volumeMounts:
        - { name: public, mountPath: /secret/public, readOnly: true }
        - { name: own, mountPath: /secret/own, readOnly: true }
        resources:
          requests: { cpu: "2", memory: 1Gi }
      volumes:
      - name: public
        secret:
          secretName: strata-keys-public
      - name: own
        secret:
          secretName: strata-key-worker-$r
EOF
r=$((r + 1))
done
