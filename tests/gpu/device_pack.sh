#!/bin/bash
# Here, before the device check (tests/gpu/device_check.sh) of a session that
# is lent a GPU: fill .devdeps/ (ignored by git, carried by the device tool's
# `run`, about 20 MB) with what the device machine lacks and cannot fetch:
# the Debian packages strata builds against (headers, libraries, .pc files;
# the device's image has CUDA, NCCL's Python wheel and CMake, not these) and
# a small Fashion-MNIST (the first 6000 training and 2000 test images, as the
# Debian package's IDX files) for the GPU training tests.
#
#   tests/gpu/device_pack.sh
#   then the device tool: run(command="tests/gpu/device_check.sh",
#                             carry=[".devdeps"], timeout_s=540)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=.devdeps
rm -rf "$dir"
mkdir -p "$dir/debs" "$dir/fashion-mnist"
# The build's dependencies and theirs (libzmq5's, OpenBLAS's runtime), and
# pkg-config: device_check.sh takes each library or tool from here only
# where the image lacks it.
(cd "$dir/debs" && apt-get download \
    libinih-dev libinih1 libzmq3-dev libzmq5 libsodium-dev libsodium23 \
    libcjson-dev libcjson1 libopenblas-dev libopenblas-pthread-dev \
    libopenblas0-pthread libopenblas0 libgfortran5 libpgm-5.3-0 libnorm1 \
    libbsd0 libmd0 zlib1g-dev \
    pkgconf pkgconf-bin libpkgconf3 \
    libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 \
    libkeyutils1 2>&1 | grep -v "^W: Download is performed")
python3 - "$dir/fashion-mnist" <<'EOF'
import gzip, struct, sys
src, out = "/usr/share/datasets/fashion-mnist", sys.argv[1]
for name, n in (("train-images-idx3-ubyte", 6000), ("train-labels-idx1-ubyte", 6000),
                ("t10k-images-idx3-ubyte", 2000), ("t10k-labels-idx1-ubyte", 2000)):
    raw = gzip.open("%s/%s.gz" % (src, name)).read()
    ndim = raw[3]
    dims = list(struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim]))
    per = 1
    for d in dims[1:]:
        per *= d
    head = raw[:4] + struct.pack(">%dI" % ndim, n, *dims[1:])
    body = raw[4 + 4 * ndim:4 + 4 * ndim + n * per]
    with gzip.open("%s/%s.gz" % (out, name), "wb") as f:
        f.write(head + body)
EOF
du -sh "$dir"
