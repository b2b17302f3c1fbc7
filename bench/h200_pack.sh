#!/usr/bin/env bash
# Here (Debian, x86-64), before a bench/h200_*.sh run on the device: what the device lacks,
# in two ignored folders to name in the call's `carry`:
#   .whl/     sleuth's pure dependencies the device image has not got, as cp312 wheels
#   .sshbin/  this machine's OpenSSH (sshd, ssh, ssh-keygen) with the libraries they load;
#             bin/ wrappers set LD_LIBRARY_PATH to lib/ for them alone
# Then: run(carry=[".whl", ".sshbin"], command="bash bench/h200_probe_latency.sh") etc.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
grep -qx '/.sshbin/' .git/info/exclude 2>/dev/null || echo '/.sshbin/' >> .git/info/exclude
rm -rf .whl .sshbin && mkdir -p .whl .sshbin/bin .sshbin/lib .sshbin/real
ver() { { python3 -m pip show "$1" 2>/dev/null || true; } | awk '/^Version:/{print $2}'; }
for name in tomlkit asyncssh cryptography cffi pycparser; do
  v=$(ver "$name"); spec="$name${v:+==$v}"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "$spec"
done
for tool in /usr/sbin/sshd /usr/bin/ssh /usr/bin/ssh-keygen /usr/lib/openssh/sshd-session /usr/lib/openssh/sshd-auth; do
  [ -x "$tool" ] || continue
  cp "$tool" .sshbin/real/
  ldd "$tool" | awk '/=> \//{print $3}' | grep -v -E '/(libc|libm|libdl|librt|libpthread|libresolv)\.so' | while read -r lib; do cp -n "$lib" .sshbin/lib/ 2>/dev/null || true; done
  name=$(basename "$tool")
  printf '#!/bin/sh\nLD_LIBRARY_PATH="$(dirname "$0")/../lib" exec "$(dirname "$0")/../real/%s" "$@"\n' "$name" > ".sshbin/bin/$name"
  chmod +x ".sshbin/bin/$name"
done
du -sh .whl .sshbin
