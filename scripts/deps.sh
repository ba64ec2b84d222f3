#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# scripts/deps.sh: install the Debian 12 packages plabel needs to build and
# test (called by `make deps`). Idempotent: when every package is already
# installed it only asks dpkg and returns; the package lists are refreshed
# only when something is missing. debootstrap is for the kernels the host
# cannot install (5.10, 7.2): scripts/debian-kernel makes roots of their
# suites with it when `make kmods` first needs them. chromium and npm are
# for the browser test of record --timeline (tests/browser/timeline.sh),
# which installs its npm packages into a cache itself.
set -eu

PKGS="
	linux-image-amd64 linux-headers-amd64
	linux-image-6.12-amd64 linux-headers-6.12-amd64
	linux-source-6.1 build-essential flex bison bc libssl-dev
	qemu-system-x86 busybox-static cpio kmod xz-utils zstd debootstrap
	protobuf-c-compiler libprotobuf-c-dev
	libunwind-dev libdw-dev libelf-dev zlib1g-dev pkg-config
	libmicrohttpd-dev curl
	golang-go graphviz strace
	clang libclang-rt-14-dev
	python3-docutils man-db libgoogle-perftools4
	chromium npm
	debhelper dh-dkms dkms dpkg-dev fakeroot lintian udev
"

missing=
for p in $PKGS; do
	# an npm that came with another nodejs package (NodeSource's, which
	# conflicts with Debian's npm) serves as well
	if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then
		continue
	fi
	st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	case "$st" in
	ii*) ;;
	*) missing="$missing $p" ;;
	esac
done

if [ -z "$missing" ]; then
	echo "deps: all packages present"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing:$missing" >&2
	echo "deps: run as root (or install them with apt-get)" >&2
	exit 1
fi

echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
