#!/bin/bash
# libvirt-suite.sh DIR: puts libvirt's own test-suite domain XMLs
# (tests/{qemuxml2argvdata,qemuxml2xmloutdata,qemustatusxml2xmldata,
# qemuhotplugtestdomains,domainschemadata}/*.xml of Debian 12's libvirt 9.0.0
# source: thousands of real domains with every interface type) into DIR, for the hook's tests
# (hook.TestLibvirtSuiteDomains). The source comes from Debian's archive with
# apt-get source --download-only under a private apt configuration (a deb-src
# line for the mirror the machine's own sources name; apt checks the files
# against the signed Sources index), so the machine's sources stay as they are.
# Nothing is built. Does nothing when DIR is already complete.
set -euo pipefail
dir=${1:?usage: libvirt-suite.sh DIR}
[ -f "$dir/.complete" ] && exit 0
mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/dl"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main" >"$work/sources.list"
apt=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$work/lists"
  -o Dir::Cache="$work/cache" -o APT::Sandbox::User=root)
echo "libvirt-suite: fetching libvirt's source from $mirror (about 9 MB)"
apt-get "${apt[@]}" update -q >/dev/null
(cd "$work/dl" && apt-get "${apt[@]}" source --download-only -q libvirt >/dev/null)
tarball=$(ls "$work"/dl/libvirt_*.orig.tar.xz)
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
for d in qemuxml2argvdata qemuxml2xmloutdata qemustatusxml2xmldata qemuhotplugtestdomains domainschemadata; do
  tar -xJf "$tarball" -C "$dir.tmp" --strip-components=2 --wildcards "*/tests/$d/*.xml"
done
n=$(find "$dir.tmp" -name '*.xml' | wc -l)
[ "$n" -gt 500 ] || { echo "libvirt-suite: only $n domain XMLs in $tarball" >&2; exit 1; }
basename "$tarball" >"$dir.tmp/.complete"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "libvirt-suite: $n domain XMLs in $dir"
